#!/usr/bin/env bash
# Issue 12's long chaos run: a 2-worker job on simulated hosts (network
# namespaces on a bridge), ROUNDS faults of each of 12 kinds (SIGKILL and
# SIGSTOP of workers and the coordinator, link down, black hole, tbf rate
# limit, disk full, slow disk, message delay, loss and reordering) at random
# moments from SEED, then the checks:
# finished, final state bit for bit the uninterrupted run's, every committed
# checkpoint verifies and none was lost. Needs root. The table goes to
# bench/out/chaos/table.md; each fault to bench/out/chaos/run/chaos/faults.jsonl.
#
#   SEED=12 ROUNDS=9 STEPS=150000 bench/drivers/chaos.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
SEED=${SEED:-12}
ROUNDS=${ROUNDS:-9}
STEPS=${STEPS:-150000}
OUT=bench/out/chaos
./deploy/install-deps.sh --test
[ -x build/bin/shardline_chaos ] || { cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build -j2; }
mkdir -p "$OUT"
build/bin/shardline_chaos --workdir "$OUT/run" --seed "$SEED" --rounds "$ROUNDS" --total_steps "$STEPS" \
  --report "$OUT/table.md" 2>&1 | tee "$OUT/chaos.log"
