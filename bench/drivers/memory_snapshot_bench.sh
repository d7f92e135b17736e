#!/usr/bin/env bash
# Issue 15: what in-memory snapshots cost at the default interval
# (checkpoint.memory_every_steps=100, two copies). Each worker times its
# snapshots (copy into the shard format + one ring shift of its shard) and
# logs their share of its training time; this runs W1 (the default MLP) and
# W2 (784-2048-2048-10, batch 256) on 2 workers and prints both ranks' shares,
# plus samples/s with snapshots on and off, alternated (ROUNDS each, default 2).
#
#   bench/drivers/memory_snapshot_bench.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${ROUNDS:-2}
OUT=bench/out/memory_snapshot
./deploy/install-deps.sh --test
[ -x build/bin/shardline-worker ] || { cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build -j2; }
rm -rf "$OUT" && mkdir -p "$OUT"

run() {  # NAME EVERY STEPS --set ...
  local name=$1 every=$2 steps=$3; shift 3
  build/bin/shardline launch --config deploy/configs/fmnist_mlp.textproto --workers 2 --workdir "$OUT/$name" \
    --set train.total_steps="$steps" --set train.eval_every=0 --set checkpoint.every_steps=0 \
    --set checkpoint.memory_every_steps="$every" "$@" 2> "$OUT/$name.log"
  for r in 0 1; do
    grep -o "[0-9]* in-memory snapshots took [0-9.]* s ([0-9.]*% of [0-9.]* s of training)" \
      "$OUT/$name/logs/worker-$r.log" | sed "s/^/$name rank $r: /"
  done
  python3 - "$OUT/$name/metrics.jsonl" "$name" <<'PY'
import json, statistics, sys
rates = [json.loads(l)["samples_per_second"] for l in open(sys.argv[1]) if '"train"' in l]
print(f"{sys.argv[2]}: {statistics.median(rates[1:] or rates):.0f} samples/s (median of train lines)")
PY
}
for ((k = 1; k <= ROUNDS; k++)); do
  run "w1_on_$k" 100 6000
  run "w1_off_$k" 0 6000
  run "w2_on_$k" 100 600 --set model.mlp.hidden_sizes=2048,2048 --set data.global_batch_size=256
  run "w2_off_$k" 0 600 --set model.mlp.hidden_sizes=2048,2048 --set data.global_batch_size=256
done
