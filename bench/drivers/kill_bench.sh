#!/usr/bin/env bash
# Issue 5 acceptance at scale: ROUNDS runs of a 2-worker job, each with
# KILLS SIGKILLs of a random process (worker 0, worker 1 or the coordinator)
# at random moments. Checkpoints are saved every 100 steps (~0.1 s), so
# kills land in training steps, in saves and in commits. Each run must end
# with exactly the parameters of an uninterrupted run (compared as the
# bytes of `shardline ckpt export` of the final step).
#
#   ROUNDS=10 KILLS=5 bench/drivers/kill_bench.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/lib/wait.sh
launch=
trap '[ -n "$launch" ] && kill -TERM $launch 2>/dev/null; true' EXIT
ROUNDS=${ROUNDS:-10}
KILLS=${KILLS:-5}
OUT=bench/out/kills
./deploy/install-deps.sh --test
[ -x build/bin/shardline-worker ] || { cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build -j2; }
rm -rf "$OUT" && mkdir -p "$OUT"
SETS=(--set train.total_steps=3000 --set checkpoint.every_steps=100 --set train.log_every=500 --set train.eval_every=1000)

build/bin/shardline launch --config deploy/configs/fmnist_mlp.textproto --workers 2 --workdir "$OUT/clean" \
  "${SETS[@]}" 2> "$OUT/clean.log"
build/bin/shardline ckpt export "$OUT/clean" --step 3000 --out "$OUT/clean.safetensors" > /dev/null

same=0
for ((round = 1; round <= ROUNDS; round++)); do
  dir="$OUT/round$round"
  build/bin/shardline launch --config deploy/configs/fmnist_mlp.textproto --workers 2 --workdir "$dir" \
    --max_restarts $((KILLS + 2)) "${SETS[@]}" 2> "$dir.log" &
  launch=$!
  wait_for 60 "$dir/coordinator.address" test -s "$dir/coordinator.address"
  addr=$(cat "$dir/coordinator.address")
  done_kills=0
  while [ $done_kills -lt "$KILLS" ] && kill -0 $launch 2>/dev/null; do
    sleep "0.$((RANDOM % 6 + 1))$((RANDOM % 10))"
    case $((RANDOM % 3)) in
      0) pid=$(pgrep -f "shardline-worker --coordinator $addr .*--rank 0" | head -1 || true); who="worker 0" ;;
      1) pid=$(pgrep -f "shardline-worker --coordinator $addr .*--rank 1" | head -1 || true); who="worker 1" ;;
      2) pid=$(pgrep -f "shardline-coordinator .*--workdir $dir" | head -1 || true); who="coordinator" ;;
    esac
    if [ -n "$pid" ]; then
      kill -9 "$pid" 2>/dev/null && { done_kills=$((done_kills + 1)); echo "round $round: killed $who" >> "$OUT/kills.txt"; }
    fi
  done
  wait $launch || { echo "round $round: launch FAILED"; launch=; continue; }
  launch=
  build/bin/shardline ckpt export "$dir" --step 3000 --out "$dir.safetensors" > /dev/null
  if cmp -s "$OUT/clean.safetensors" "$dir.safetensors"; then
    same=$((same + 1)); echo "round $round: $done_kills kills, parameters identical"
  else
    echo "round $round: $done_kills kills, parameters DIFFER"
  fi
done
echo "identical: $same of $ROUNDS rounds"
