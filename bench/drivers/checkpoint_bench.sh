#!/usr/bin/env bash
# Issue 5 side by side: checkpoint shard write (fsync) and verified read
# throughput against the disk's own sequential write-with-fsync (dd
# conv=fsync) and read (dd) of the same size in the same directory, and the
# training stall of async against synchronous saves.
#
#   bench/drivers/checkpoint_bench.sh [DIR]     # DIR on the disk to measure (default bench/out/ckpt)
set -euo pipefail
cd "$(dirname "$0")/../.."
DIR=${1:-bench/out/ckpt}
./deploy/install-deps.sh --test
[ -x build/bench/checkpoint_bench ] || { cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build -j2; }
rm -rf "$DIR" && mkdir -p "$DIR"
W2_FLOATS=4215818   # MLP 784-2048-2048-10 parameters (params + momentum = 33.7 MB)
GIB_FLOATS=134217728  # 2 buffers x 512 MiB = 1 GiB

REPS=${REPS:-5}
drop() { sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true; }
dd_rate() {  # dd's stderr -> GB/s from its exact byte count and seconds
  awk '/copied/ {printf "%.3f", $1 / $(NF-3) / 1e9}'
}
dd_json() {  # MiB LABEL -> one JSON line: write (conv=fsync), cached read, cold read
  local mb=$1 label=$2 f="$DIR/dd.bin" w r c
  w=$(dd if=/dev/zero of="$f" bs=1M count=$mb conv=fsync 2>&1 >/dev/null | dd_rate)
  r=$(dd if="$f" of=/dev/null bs=1M 2>&1 >/dev/null | dd_rate)
  drop
  c=$(dd if="$f" of=/dev/null bs=1M 2>&1 >/dev/null | dd_rate)
  rm -f "$f"
  echo "{\"impl\":\"dd\",\"size\":\"$label\",\"write_GBps\":$w,\"cached_read_GBps\":$r,\"cold_read_GBps\":$c}"
}
# Alternate dd and shardline in every repetition, so drift in the shared
# disk's speed hits both; the summary reports medians over repetitions.
RESULTS="$DIR/results.jsonl"
: > "$RESULTS"
for rep in $(seq "$REPS"); do
  echo "== repetition $rep of $REPS: dd and shardline, 32 MiB / W2 state and 1 GiB" >&2
  for size in w2:32:$W2_FLOATS gib:1024:$GIB_FLOATS; do
    IFS=: read -r label mb floats <<< "$size"
    dd_json "$mb" "$label" >> "$RESULTS"
    build/bench/checkpoint_bench "$DIR" "$floats" | sed "s/^{/{\"impl\":\"shardline\",\"size\":\"$label\",/" >> "$RESULTS"
    build/bench/checkpoint_bench --cold "$DIR" "$floats" | sed "s/^{/{\"impl\":\"shardline\",\"size\":\"$label\",/" >> "$RESULTS"
  done
done
/usr/bin/python3 bench/lib/summarize_checkpoint.py "$RESULTS"

echo "== W2 training stall: async vs synchronous saves every 20 steps" >&2
for mode in true false; do
  build/bin/shardline train --config deploy/configs/fmnist_mlp.textproto --workdir "$DIR/w2_$mode" \
    --set model.mlp.hidden_sizes=2048,2048 --set data.global_batch_size=256 --set train.total_steps=200 \
    --set train.eval_every=0 --set checkpoint.every_steps=20 --set checkpoint.keep_last=2 \
    --set checkpoint.async=$mode 2>&1 | grep "done:" | sed "s/^/async=$mode: /"
done
