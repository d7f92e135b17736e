#!/usr/bin/env bash
# Issue 18: latency of small collectives, recursive doubling (log-depth)
# against the ring, by size and world size.
#
#  1. In one process (N ranks as threads) over the in-process transport and
#     over gRPC on loopback: bench/collective_latency_bench, the scalar
#     all-reduce (4 doubles) and AllReduce of 8 B .. 256 KiB by algorithm.
#  2. N processes over loopback gRPC (shardline-allreduce-worker --op
#     scalars), as the training job runs it. With BASELINE=<a
#     shardline-allreduce-worker binary> (e.g. one built from an older
#     commit) it runs beside this build's, one after the other per N.
#
#   bench/drivers/small_collectives_bench.sh
#   WORLDS="2 16" ITERS=100 BASELINE=/tmp/old/bin/shardline-allreduce-worker bench/drivers/small_collectives_bench.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
WORLDS=${WORLDS:-"2 4 8 16"}
ITERS=${ITERS:-200}
BASELINE=${BASELINE:-}
OUT=bench/out/small_collectives
./deploy/install-deps.sh --test
if [ ! -x build/bench/collective_latency_bench ] || [ ! -x build/bin/shardline-allreduce-worker ]; then
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build -j2
fi
rm -rf "$OUT" && mkdir -p "$OUT"

echo "== in one process: local and gRPC transports" >&2
timeout 1200 build/bench/collective_latency_bench --worlds "$(echo $WORLDS | tr ' ' ,)" --iters "$ITERS" \
  > "$OUT/in_process.jsonl"

scalars() {  # BINARY N LABEL
  local bin=$1 n=$2 label=$3 rdv r pids=()
  rdv=$(mktemp -d)
  for ((r = 1; r < n; r++)); do
    timeout 300 "$bin" --rank $r --world $n --rendezvous "$rdv" --op scalars --sizes 32 --iters "$ITERS" 2>/dev/null &
    pids+=($!)
  done
  timeout 300 "$bin" --rank 0 --world $n --rendezvous "$rdv" --op scalars --sizes 32 --iters "$ITERS" 2>/dev/null |
    sed "s/^{/{\"build\":\"$label\",/"
  for p in "${pids[@]}"; do wait "$p"; done
  rm -rf "$rdv"
}
for n in $WORLDS; do
  echo "== N=$n processes: scalar all-reduce" >&2
  scalars build/bin/shardline-allreduce-worker $n this >> "$OUT/processes.jsonl"
  [ -n "$BASELINE" ] && scalars "$BASELINE" $n baseline >> "$OUT/processes.jsonl"
done
/usr/bin/python3 bench/lib/summarize_small_collectives.py "$OUT"
