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
# gradients as bfloat16 (collective.bf16_gradients).
#
#   bench/shaped_links_bench.sh                          # 10 and 2.5 Gbit/s, N = 2 and 4
#   RATES="none 10gbit" WORLDS=2 STEPS=60 MODES=overlap CAP=4 bench/shaped_links_bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=bench/out/shaped
STEPS=${STEPS:-150}
RATES=${RATES:-"10gbit 2500mbit"}
WORLDS=${WORLDS:-"2 4"}
MODES=${MODES:-"overlap sequential"}
CAP=${CAP:-}
P=${PREFIX:-slsh}
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1

[ "$(id -u)" = 0 ] || { echo "$0: needs root (network namespaces)" >&2; exit 1; }
command -v iperf3 > /dev/null || { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q iperf3; }
/usr/bin/python3 -c "import torch" 2> /dev/null || {
  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-torch python3-numpy; }
./deploy/install-deps.sh
[ -x build/bin/shardline-worker ] || { cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build -j2; }
rm -rf "$OUT" && mkdir -p "$OUT"

max_world=0
for n in $WORLDS; do ((n > max_world)) && max_world=$n; done
HOSTS=$((max_world + 1))
ns() { echo "${P}h$1"; }
addr() { echo "10.214.0.$(($1 + 1))"; }

cleanup() {
  local n pid
  for n in $(ip netns list | awk '{print $1}' | grep "^${P}" || true); do
    for pid in $(ip netns pids "$n" 2> /dev/null); do kill -9 "$pid" 2> /dev/null || true; done
    ip netns del "$n" 2> /dev/null || true
  done
}
trap cleanup EXIT
cleanup

ip netns add "${P}sw"
ip -n "${P}sw" link add br0 type bridge
ip -n "${P}sw" link set br0 up
for ((h = 0; h < HOSTS; h++)); do
  ip netns add "$(ns $h)"
  ip -n "${P}sw" link add "p$h" type veth peer name eth0 netns "$(ns $h)"
  ip -n "${P}sw" link set "p$h" master br0 up
  ip -n "$(ns $h)" addr add "$(addr $h)/24" dev eth0
  ip -n "$(ns $h)" link set eth0 up
  ip -n "$(ns $h)" link set lo up
done

shape() {  # RATE ("none": no limit). A burst of 1 ms at the rate.
  local h burst
  for ((h = 0; h < HOSTS; h++)); do
    tc -n "$(ns $h)" qdisc del dev eth0 root 2> /dev/null || true
    [ "$1" = none ] && continue
    burst=$(/usr/bin/python3 -c "
import re,sys; m=re.fullmatch(r'(\d+)(gbit|mbit)', sys.argv[1]); bits=int(m[1])*(10**9 if m[2]=='gbit' else 10**6)
print(max(65536, bits // 8 // 1000))" "$1")
    tc -n "$(ns $h)" qdisc add dev eth0 root tbf rate "$1" burst "$burst" latency 20ms
  done
}

calibrate() {  # RATE -> iperf3 host 2 -> host 1, Gbit/s
  ip netns exec "$(ns 1)" iperf3 -s -1 -p 5201 > /dev/null 2>&1 &
  local server=$!
  sleep 0.5
  ip netns exec "$(ns 2)" timeout 30 iperf3 -c "$(addr 1)" -p 5201 -t 3 -J > "$OUT/iperf_$1.json" || true
  wait "$server" 2> /dev/null || true
}

W2="--set model.mlp.hidden_sizes=2048,2048 --set data.global_batch_size=256 --set train.total_steps=$STEPS
    --set train.log_every=10 --set train.eval_every=0 --set checkpoint.every_steps=0"
CFG=deploy/configs/fmnist_mlp.textproto

run_shardline() {  # RATE N MODE
  local dir="$OUT/shardline_$3_$1_n$2" r pids=() sets="--set collective.overlap=true"
  case $3 in sequential*) sets="--set collective.overlap=false" ;; esac
  case $3 in *-bf16) sets="$sets --set collective.bf16_gradients=true" ;; esac
  [ -n "$CAP" ] && sets="$sets --set collective.bucket_cap_mb=$CAP"
  mkdir -p "$dir"
  local token
  token=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
  SHARDLINE_TOKEN=$token timeout 600 ip netns exec "$(ns 0)" build/bin/shardline-coordinator --config $CFG \
    --listen "$(addr 0):7000" --workdir "$dir" --set "runtime.num_workers=$2" $W2 $sets 2> "$dir/coordinator.log" &
  pids+=($!)
  for ((r = 0; r < $2; r++)); do
    SHARDLINE_TOKEN=$token timeout 600 ip netns exec "$(ns $((r + 1)))" build/bin/shardline-worker \
      --coordinator "$(addr 0):7000" --listen "$(addr $((r + 1))):7100" --rank $r 2> "$dir/worker-$r.log" &
    pids+=($!)
  done
  for r in "${pids[@]}"; do wait "$r" || echo "shardline $1 N=$2: a process failed (see $dir)" >&2; done
}

run_ddp() {  # RATE N
  local r pids=()
  for ((r = $2 - 1; r >= 0; r--)); do
    ip netns exec "$(ns $((r + 1)))" env MASTER_ADDR="$(addr 1)" MASTER_PORT=29500 RANK=$r WORLD_SIZE=$2 \
      GLOO_SOCKET_IFNAME=eth0 PYTHONPATH=bench timeout 600 /usr/bin/python3 bench/torch_ddp.py --hidden 2048,2048 \
      --batch 256 --steps "$STEPS" --eval_every 1000000 > "$OUT/ddp_$1_n$2_rank$r.jsonl" 2> "$OUT/ddp_$1_n$2_rank$r.log" &
    pids+=($!)
  done
  for r in "${pids[@]}"; do wait "$r" || echo "DDP $1 N=$2: a rank failed" >&2; done
}

for rate in $RATES; do
  shape "$rate"
  echo "== $rate: iperf3" >&2
  calibrate "$rate"
  for n in $WORLDS; do
    for mode in $MODES; do
      echo "== $rate N=$n shardline $mode" >&2
      run_shardline "$rate" "$n" "$mode"
    done
    echo "== $rate N=$n DDP" >&2
    run_ddp "$rate" "$n"
  done
done

/usr/bin/python3 bench/summarize_shaped.py "$OUT" "$RATES" "$WORLDS" "$MODES"
