#!/usr/bin/env bash
# Issue 16: W2 (784-2048-2048-10, global batch 256) on simulated hosts with
# shaped links, shardline against PyTorch DDP (gloo, its bucketed overlap
# on) over the same links in the same run.
#
# Each host is a network namespace with one interface (eth0, 10.214.0.<h+1>)
# on a veth pair to a bridge in a namespace of its own (a switch); host 0
# runs the coordinator, hosts 1..N the workers (or the DDP ranks). Every
# host's outgoing traffic goes through a token bucket (tc tbf) at each rate
# of RATES; iperf3 between two hosts measures what the link then carries.
# Everything is created and removed by this script (root needed); nothing
# is added to the namespace it runs in.
#
# shardline runs once per mode of MODES: "overlap" (collective.overlap,
# the default) and "sequential" (collective.overlap=false), with buckets of
# CAP MiB (collective.bucket_cap_mb; unset: the config's default); a mode
# ending in "-bf16" (e.g. overlap-bf16) also sends the reduce-scatter's
# gradients as bfloat16 (collective.bf16_gradients). A mode may end in
# "@MIB" (e.g. overlap@4) to set its own bucket cap, so that two caps run
# side by side against the same DDP run.
#
#   bench/drivers/shaped_links_bench.sh                          # 10 and 2.5 Gbit/s, N = 2 and 4
#   RATES="none 10gbit" WORLDS=2 STEPS=60 MODES=overlap CAP=4 bench/drivers/shaped_links_bench.sh
#   RATES=2500mbit WORLDS=2 MODES="overlap@4 overlap@25" bench/drivers/shaped_links_bench.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=bench/out/shaped
STEPS=${STEPS:-150}
RATES=${RATES:-"10gbit 2500mbit"}
WORLDS=${WORLDS:-"2 4"}
MODES=${MODES:-"overlap sequential"}
CAP=${CAP:-}
P=${PREFIX:-slsh}
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1

command -v iperf3 > /dev/null || { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q iperf3; }
/usr/bin/python3 -c "import torch" 2> /dev/null || {
  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-torch python3-numpy; }
./deploy/install-deps.sh --test
[ -x build/bin/shardline-worker ] || { cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build -j2; }
rm -rf "$OUT" && mkdir -p "$OUT"

max_world=0
for n in $WORLDS; do ((n > max_world)) && max_world=$n; done
SIM_PREFIX=$P
source bench/lib/sim_hosts.sh
sim_hosts_up $((max_world + 1))
ns() { sim_ns "$1"; }
addr() { sim_addr "$1"; }

W2="--set model.mlp.hidden_sizes=2048,2048 --set data.global_batch_size=256 --set train.total_steps=$STEPS
    --set train.log_every=10 --set train.eval_every=0 --set checkpoint.every_steps=0"
CFG=deploy/configs/fmnist_mlp.textproto

run_shardline() {  # RATE N MODE
  local dir="$OUT/shardline_$3_$1_n$2" sets=(--set collective.overlap=true) base=${3%@*} cap=$CAP
  [ "$base" != "$3" ] && cap=${3##*@}
  case $base in sequential*) sets=(--set collective.overlap=false) ;; esac
  case $base in *-bf16) sets+=(--set collective.bf16_gradients=true) ;; esac
  [ -n "$cap" ] && sets+=(--set "collective.bucket_cap_mb=$cap")
  # shellcheck disable=SC2086
  sim_run_shardline "$dir" "$2" $CFG $W2 "${sets[@]}" || echo "shardline $1 N=$2: a process failed (see $dir)" >&2
}

run_ddp() {  # RATE N
  local r pids=()
  for ((r = $2 - 1; r >= 0; r--)); do
    ip netns exec "$(ns $((r + 1)))" env MASTER_ADDR="$(addr 1)" MASTER_PORT=29500 RANK=$r WORLD_SIZE=$2 \
      GLOO_SOCKET_IFNAME=eth0 PYTHONPATH=bench/peers timeout 600 /usr/bin/python3 bench/peers/torch_ddp.py --hidden 2048,2048 \
      --batch 256 --steps "$STEPS" --eval_every 1000000 > "$OUT/ddp_$1_n$2_rank$r.jsonl" 2> "$OUT/ddp_$1_n$2_rank$r.log" &
    pids+=($!)
  done
  for r in "${pids[@]}"; do wait "$r" || echo "DDP $1 N=$2: a rank failed" >&2; done
}

for rate in $RATES; do
  sim_shape "$rate"
  echo "== $rate: iperf3" >&2
  sim_iperf "$OUT/iperf_$rate.json"
  for n in $WORLDS; do
    for mode in $MODES; do
      echo "== $rate N=$n shardline $mode" >&2
      run_shardline "$rate" "$n" "$mode"
    done
    echo "== $rate N=$n DDP" >&2
    run_ddp "$rate" "$n"
  done
done

/usr/bin/python3 bench/lib/summarize_shaped.py "$OUT" "$RATES" "$WORLDS" "$MODES"
