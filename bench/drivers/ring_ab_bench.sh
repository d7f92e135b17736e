#!/usr/bin/env bash
# A/B of the gRPC ring all-reduce: this tree's shardline-allreduce-worker
# against a baseline build of it (another commit), alternately in the same
# rounds, with the bare TCP ring (bench/peers/tcp_ring_allreduce.cc) as the
# yardstick; N = 2 on loopback. For a change to the data plane's plumbing
# (e.g. the connection gate, issue 62) that should move nothing.
#
#   git worktree add /tmp/base 9fd58cf && cmake -S /tmp/base -B /tmp/base/build -DCMAKE_BUILD_TYPE=Release \
#     -DSHARDLINE_BUILD_TESTS=OFF -DSHARDLINE_BUILD_BENCH=OFF && cmake --build /tmp/base/build --target shardline_allreduce_worker
#   BASELINE=/tmp/base/build/bin/shardline-allreduce-worker bench/drivers/ring_ab_bench.sh
#
# Prints one JSON line per implementation, size and round; the medians are
# worked out by hand (three rounds).
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${BASELINE:?BASELINE=path of the baseline shardline-allreduce-worker}"
SIZES=${SIZES:-16777216,67108864}
ITERS=${ITERS:-20}
REPS=${REPS:-3}
OUT=bench/out/ring_ab
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
mkdir -p "$OUT"
g++ -O2 -std=c++17 -pthread -o "$OUT/tcp_ring_allreduce" bench/peers/tcp_ring_allreduce.cc
run() {  # BIN LABEL
  local rdv; rdv=$(mktemp -d)
  "$1" --rank 1 --world 2 --rendezvous "$rdv" --op allreduce --sizes "$SIZES" --iters "$ITERS" 2>/dev/null &
  "$1" --rank 0 --world 2 --rendezvous "$rdv" --op allreduce --sizes "$SIZES" --iters "$ITERS" 2>/dev/null |
    sed "s/\"impl\":\"shardline\"/\"impl\":\"$2\"/"
  wait
  rm -rf "$rdv"
}
for ((rep = 1; rep <= REPS; rep++)); do
  run "$BASELINE" baseline
  run build/bin/shardline-allreduce-worker this
  "$OUT/tcp_ring_allreduce" 1 2 31100 "$SIZES" "$ITERS" &
  "$OUT/tcp_ring_allreduce" 0 2 31100 "$SIZES" "$ITERS"
  wait
done
