#!/usr/bin/env bash
# Issues 5 and 15 side by side: time from SIGKILL of one of 2 workers to the
# first completed training step after the restart, for `shardline launch
# --max_restarts` restoring from the workers' memory (the default) and from
# the last committed checkpoint (snapshots off), and for torchrun's elastic
# restart of a 2-process DDP job (restarts every worker from step 0), in the
# same run. KILLS kills each (default 5); prints medians, and for shardline
# the bytes the surviving worker read and the steps redone.
#
# SHARDLINE_MODES picks the shardline runs (default "memory disk"),
# TORCHRUN=0 leaves torchrun out, CONFIG and WORKERS set the shardline job
# (default the README's, 2 workers) and SETS adds config overrides to every
# shardline run (e.g. a bigger model).
#
#   bench/drivers/recovery_bench.sh
#   KILLS=3 TORCHRUN=0 SHARDLINE_MODES=memory SETS="--set model.mlp.hidden_sizes=2048,2048" bench/drivers/recovery_bench.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
KILLS=${KILLS:-5}
OUT=${OUT:-bench/out/recovery}
SHARDLINE_MODES=${SHARDLINE_MODES:-"memory disk"}
TORCHRUN=${TORCHRUN:-1}
SETS=${SETS:-}
CONFIG=${CONFIG:-deploy/configs/fmnist_mlp.textproto}
WORKERS=${WORKERS:-2}
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
need=()
/usr/bin/python3 -c "import torch" 2>/dev/null || need+=(python3-torch python3-numpy)
command -v bc >/dev/null || need+=(bc)
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}"
fi
./deploy/install-deps.sh --test
[ -x build/bin/shardline-worker ] || { cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build -j2; }
rm -rf "$OUT" && mkdir -p "$OUT"
now() { date +%s.%N; }
# Every wait is bounded (bench/lib/wait.sh); a bench that gives up stops the
# job it started.
source bench/lib/wait.sh
job=
trap '[ -n "$job" ] && kill -TERM $job 2>/dev/null; true' EXIT
# Log timestamps are local "HH:MM:SS.micro" of today.
to_epoch() { date -d "$(date +%F) $1" +%s.%N; }

# One shardline run: KILLS SIGKILLs of worker 1, each timed from the kill to
# the first completed step after the restart; also the checkpoint bytes the
# surviving worker 0 read for the restore (its log: the Env's reads of the
# checkpoint files; 0 from memory) and the steps redone (its step before the
# kill minus the step restored).
run_shardline() {  # NAME --set ...
  local name=$1; shift
  echo "== shardline $name: $KILLS kills of worker 1" >&2
  build/bin/shardline launch --config "$CONFIG" --workers "$WORKERS" --workdir "$OUT/$name" \
    --max_restarts $KILLS --set train.total_steps=100000000 --set checkpoint.every_steps=200 \
    --set train.log_every=1000000 --set train.eval_every=0 $SETS "$@" 2> "$OUT/$name.log" &
  job=$!
  local log="$OUT/$name/logs/worker-0.log"
  wait_for 300 "the first step of $name (see $log)" count_above "$log" "first step of this generation" 0
  local port
  port=$(grep -o "metrics on port [0-9]*" "$log" | head -1 | grep -o "[0-9]*$")
  for ((k = 1; k <= KILLS; k++)); do
    sleep 2
    local seen pid t0 t1 bytes before restored
    seen=$(grep -c "first step of this generation" "$log")
    pid=$(pgrep -f "shardline-worker --coordinator .* --rank 1" | head -1)
    before=$(curl -s "127.0.0.1:$port/metrics" | awk '$1 == "shardline_step" {print int($2)}')
    t0=$(now); kill -9 "$pid"
    wait_for 120 "the first step after kill $k of $name (see $log)" count_above "$log" "first step of this generation" "$seen"
    bytes=$(grep "restored step" "$log" | tail -1 | grep -o "([0-9]* checkpoint bytes read)" | grep -o "[0-9]*" || true)
    t1=$(to_epoch "$(grep "first step of this generation" "$log" | tail -1 | awk '{print $2}')")
    restored=$(( $(grep -o "first step of this generation done (step [0-9]*" "$log" | tail -1 | grep -o "[0-9]*$") - 1 ))
    echo "shardline_$name $(echo "$t1 - $t0" | bc) ${bytes:-0} $((before - restored))" | tee -a "$OUT/times.txt"
  done
  kill -TERM $job; wait $job || true
  job=
}
# From the peers' memory (the default: a snapshot every 100 steps), and from
# the last committed checkpoint on disk (snapshots off).
for mode in $SHARDLINE_MODES; do
  case $mode in
    memory) run_shardline memory ;;
    disk) run_shardline disk --set checkpoint.memory_every_steps=0 ;;
    *) echo "SHARDLINE_MODES: unknown mode '$mode' (memory, disk)" >&2; exit 2 ;;
  esac
done

run_torchrun() {  # NAME EXTRA_ARGS...
  local name=$1; shift
  echo "== torchrun $name: $KILLS kills" >&2
  (cd bench/peers && PYTHONPATH=. /usr/bin/torchrun --nproc_per_node=2 --max_restarts=$KILLS --redirects=1 --tee=1 "$@" \
     torch_elastic.py > "../../$OUT/torch_$name.log" 2>&1) &
  job=$!
  wait_for 300 "torchrun's first step ($OUT/torch_$name.log)" count_above "$OUT/torch_$name.log" "FIRSTSTEP" 0
  for ((k = 1; k <= KILLS; k++)); do
    sleep 2
    local pid t0 t1
    pid=$(pgrep -f "^/usr/bin/python3[.0-9]* -u torch_elastic.py" | tail -1)
    t0=$(now); kill -9 "$pid"
    wait_for 300 "torchrun's first step after restart $k" count_above "$OUT/torch_$name.log" "FIRSTSTEP .* restart $k" 0
    t1=$(grep -o "FIRSTSTEP [0-9.]* rank [0-9]* restart $k\$" "$OUT/torch_$name.log" | awk '{print $2}' | sort -n | tail -1)
    echo "torchrun_$name $(echo "$t1 - $t0" | bc) - -" | tee -a "$OUT/times.txt"
  done
  pkill -TERM -f "torchrun --nproc_per_node=2" || true
  wait $job || true
  job=
}
if [ "$TORCHRUN" != 0 ]; then
  run_torchrun default
  run_torchrun monitor05 --monitor_interval=0.5
fi

/usr/bin/python3 - "$OUT/times.txt" <<'PY'
import collections, statistics, sys
t = collections.defaultdict(list)
extra = collections.defaultdict(list)
for line in open(sys.argv[1]):
    k, v, read, redone = line.split()
    t[k].append(float(v))
    if read != "-":
        extra[k].append((int(read), int(redone)))
for k, v in t.items():
    more = ""
    if extra[k]:
        reads = [r for r, _ in extra[k]]
        redone = [d for _, d in extra[k]]
        more = (f"; checkpoint bytes read by the survivor: median {statistics.median(reads) / 1e6:.2f} MB"
                f" (max {max(reads) / 1e6:.2f}),"
                f" steps redone median {statistics.median(redone):.0f} (max {max(redone)})")
    print(f"{k}: median {statistics.median(v):.2f} s over {len(v)} kills ({', '.join(f'{x:.2f}' for x in v)}){more}")
PY
