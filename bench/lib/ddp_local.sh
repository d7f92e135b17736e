# Sourced by the bench scripts: N PyTorch ranks on this host, gloo over
# loopback, as DDP runs them (MASTER_ADDR/PORT, RANK, WORLD_SIZE); rank 0's
# output goes to stdout, the others' is dropped.
#
#   . bench/lib/ddp_local.sh
#   ddp_local bench/peers/torch_ddp.py 2 --hidden 2048,2048 > out.jsonl
ddp_local() {  # SCRIPT N ARGS...
  local script=$1 n=$2 r
  shift 2
  local port=$((29600 + RANDOM % 1000))
  for ((r = 1; r < n; r++)); do
    MASTER_ADDR=127.0.0.1 MASTER_PORT=$port RANK=$r WORLD_SIZE=$n \
      PYTHONPATH=bench/peers /usr/bin/python3 "$script" "$@" > /dev/null &
  done
  MASTER_ADDR=127.0.0.1 MASTER_PORT=$port RANK=0 WORLD_SIZE=$n PYTHONPATH=bench/peers /usr/bin/python3 "$script" "$@"
  wait
}
