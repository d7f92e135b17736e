#!/usr/bin/env bash
# Issue 63: what the numerics checks cost a step. `austen_gpt` on WORKERS
# workers for STEPS steps (no evaluation but the final one, no checkpoints,
# no snapshots), REPS alternating rounds of: the build before parameter
# agreement (BASELINE: a directory holding that build's shardline,
# shardline-coordinator and shardline-worker; skipped when unset), this
# build with audits off (`audit.every_steps=0`: parameter agreement only),
# and this build at the default audit cadence (every 50 steps). Prints each
# run's training seconds (metrics.jsonl's train_seconds) and the medians.
#
#   BASELINE=/tmp/base/build/bin bench/drivers/numerics_cost_bench.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-bench/out/numerics_cost}
STEPS=${STEPS:-300}
REPS=${REPS:-3}
WORKERS=${WORKERS:-2}
CONFIG=${CONFIG:-deploy/configs/austen_gpt.textproto}
[ -x build/bin/shardline ] || { ./deploy/install-deps.sh --test && cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build -j2; }
[ -f /var/lib/shardline/austen/train.txt ] || build/bin/shardline data austen --out /var/lib/shardline/austen
rm -rf "$OUT" && mkdir -p "$OUT"

# run NAME BIN_DIR [--set ...]: one job; appends "NAME seconds" to $OUT/times.
run() {
  local name=$1 bin=$2
  shift 2
  local dir="$OUT/$name-$rep"
  "$bin/shardline" launch --config "$CONFIG" --workers "$WORKERS" --workdir "$dir" \
    --set "train.total_steps=$STEPS" --set train.eval_every=0 --set checkpoint.every_steps=0 \
    --set checkpoint.memory_every_steps=0 "$@" 2> "$dir.log"
  /usr/bin/python3 - "$dir/metrics.jsonl" "$name" >> "$OUT/times" <<'PY'
import json, sys
secs = [json.loads(l)["train_seconds"] for l in open(sys.argv[1]) if '"train_seconds"' in l]
print(sys.argv[2], secs[-1])
PY
  tail -1 "$OUT/times" >&2
}

for rep in $(seq 1 "$REPS"); do
  [ -n "${BASELINE:-}" ] && run before "$BASELINE"
  run agreement build/bin --set audit.every_steps=0
  run audited build/bin --set audit.every_steps=50
done
/usr/bin/python3 - "$OUT/times" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    name, secs = line.split()
    runs.setdefault(name, []).append(float(secs))
base = statistics.median(runs["agreement"])
for name, secs in runs.items():
    m = statistics.median(secs)
    print(f"{name}: median {m:.3f} s of training ({', '.join(f'{s:.3f}' for s in secs)}); {m / base:.3f}x audits off")
PY
