#!/usr/bin/env bash
# Issue 15, elastic worlds: the default job (W1: Fashion-MNIST MLP, 15
# epochs, global batch 128) on 4 workers where worker 1 is SIGKILLed at
# about step KILL_AT and never returns (`--max_restarts 0`,
# runtime.min_workers=3, runtime.replace_timeout_seconds=REPLACE), beside the
# same job uninterrupted on 4 and on 3 workers, in the same run. Prints wall
# time, final test accuracy, the step the world shrank at, steps redone, and
# the time from the kill to the 3-worker world's first step.
#
#   bench/drivers/elastic_bench.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
KILL_AT=${KILL_AT:-2000}
REPLACE=${REPLACE:-5}
OUT=bench/out/elastic
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
command -v bc >/dev/null || { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q bc; }
./deploy/install-deps.sh --test
[ -x build/bin/shardline-worker ] || { cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build -j2; }
rm -rf "$OUT" && mkdir -p "$OUT"
now() { date +%s.%N; }
to_epoch() { date -d "$(date +%F) $1" +%s.%N; }
launch() {  # NAME WORKERS --set ...
  local name=$1 workers=$2; shift 2
  build/bin/shardline launch --config deploy/configs/fmnist_mlp.textproto --workers "$workers" \
    --workdir "$OUT/$name" --max_restarts 0 "$@" 2> "$OUT/$name.log"
}
accuracy() { grep '"split":"eval"' "$OUT/$1/metrics.jsonl" | tail -1 | grep -o '"accuracy":[0-9.]*' | cut -d: -f2; }
source bench/lib/wait.sh
pid=
trap '[ -n "$pid" ] && kill -TERM $pid 2>/dev/null; true' EXIT
last_step() { grep '"split":"train"' "$OUT/$1/metrics.jsonl" 2>/dev/null | tail -1 | grep -o '"step":[0-9]*' | cut -d: -f2; }

for workers in 4 3; do
  echo "== uninterrupted, $workers workers" >&2
  t0=$(now); launch "plain$workers" $workers; t1=$(now)
  echo "plain$workers $(echo "$t1 - $t0" | bc) $(accuracy plain$workers)" | tee -a "$OUT/results.txt"
done

echo "== 4 workers, worker 1 killed at step ~$KILL_AT and never back" >&2
t0=$(now)
launch elastic 4 --set runtime.min_workers=3 --set runtime.replace_timeout_seconds=$REPLACE &
pid=$!
reached() { [ "$(last_step elastic || echo 0)" -ge "$KILL_AT" ] 2>/dev/null; }
wait_for 600 "step $KILL_AT of the elastic run" reached
tk=$(now)
kill -9 "$(pgrep -f "shardline-worker --coordinator .* --rank 1" | head -1)"
wait $pid
t1=$(now)
coord="$OUT/elastic/logs/coordinator.log"
shrunk=$(grep -o "the world changed size: 4 -> 3 workers at step [0-9]*" "$coord" | grep -o "[0-9]*$")
redone=$(grep -o "redoes [0-9]* steps" "$coord" | head -1 | grep -o "[0-9]*")
# The first step of the 3-worker world, from rank 0's log.
first=$(grep "first step of this generation" "$OUT/elastic/logs/worker-0.log" | sed -n 2p | awk '{print $2}')
echo "elastic $(echo "$t1 - $t0" | bc) $(accuracy elastic) shrunk_at=$shrunk redone=$redone" \
     "kill_to_first_step=$(echo "$(to_epoch "$first") - $tk" | bc) replace_timeout=$REPLACE" | tee -a "$OUT/results.txt"
grep '"split":"world"' "$OUT/elastic/metrics.jsonl"
