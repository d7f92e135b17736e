#!/usr/bin/env bash
# ZeRO stage 3 and remat, measured (docs/collectives.md, "Stage 3"):
# 1. Peak RSS per worker (the final log line's, the largest of the workers)
#    for N = 1, 2, 4 at stage 2 and 3, with and without remat, for the GPT
#    at two sizes: deploy/configs/austen_gpt.textproto (0.84M parameters)
#    and one of 50.6M (d_model 512, 16 layers, 8 heads; batch 8), each a
#    few steps, beside the model's prediction: the state (stage 2: 8P + 8P/N
#    bytes; stage 3: 16P/N) plus the buckets gathered at once (the log's
#    "at the step's peak" beyond the own pieces, twice: parameters and their
#    gradients) or, if more, what the run's end adds (its evaluation's
#    workspace, as the log reports, and at stage 3 the parameters it
#    gathers, 4P (1 - 1/N)), the training activations the log reports, and the
#    process baseline (the peak RSS of a 1-layer, d=32 GPT). No checkpoint
#    saves and no in-memory snapshots (each holds a copy of the rank's
#    shard: docs/operations.md); the validation text is 1 KiB, so the final
#    evaluation's chunk stays small. Drawn with gnuplot into
#    bench/zero3_memory.png.
# 2. A model that does not fit: the 50.6M GPT, whose training state is
#    16 bytes x 50.6M = 809 MB, on 4 workers each in its own cgroup v1 memory
#    group capped at CAP_MB (default 520; /sys/fs/cgroup/memory/<group>/
#    memory.limit_in_bytes, the worker's PID written to its cgroup.procs;
#    created and removed here): at stage 3 it trains; at stage 2 the kernel
#    kills a worker for memory (the group's oom_kill count), and the run is
#    stopped. Both with remat.
# 3. Step time of stage 3 over stage 2 at N = 2 and 4 (loopback), both
#    sizes, with and without remat, from longer runs than part 1's: the
#    50.6M GPT for STEPS_BIG steps (default 24) and austen_gpt for
#    STEPS_SMALL (default 160), the rate logged every sixth of the run; a
#    run's step time is the median of its windows after the first (which
#    holds start-up). Stage 2 and stage 3 run alternately, REPS times
#    (default 1), and each ratio is of the medians over the reps.
#    STEP_SIZES="big" times the 50.6M GPT only.
# One command (about 28 minutes here; root for part 2):
#   bench/drivers/zero3_memory_bench.sh
#   PARTS="1 3" bench/drivers/zero3_memory_bench.sh   # no cgroups
set -euo pipefail
cd "$(dirname "$0")/../.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build build -j2 --target shardline_cli shardline_worker_bin shardline_coordinator_bin > /dev/null
OUT=bench/out/zero3
PARTS=${PARTS:-1 2 3}
CAP_MB=${CAP_MB:-520}
mkdir -p "$OUT"  # each part replaces its own outputs; the summary reads both parts'
tmp="$(mktemp -d /tmp/zero3_bench.XXXXXX)"
trap 'rm -rf "$tmp"' EXIT
./build/bin/shardline data austen --out "$tmp/text" > /dev/null
# A short validation file: the final evaluation (the whole parameters, and
# one chunk's activations) of the 50M model stays small.
head -c 1024 "$tmp/text/val.txt" > "$tmp/text/val_small.txt"
CFG=deploy/configs/austen_gpt.textproto
COMMON=(--set "data.text.train_path=$tmp/text/train.txt" --set train.eval_every=0 --set checkpoint.every_steps=0
        --set checkpoint.save_final=false --set checkpoint.memory_every_steps=0 --set checkpoint.best_metric=
        --set train.log_every=1000
        --set runtime.watchdog_timeout_seconds=600)
SMALL=(--set "data.text.val_path=$tmp/text/val_small.txt" --set train.total_steps=40 --set schedule.warmup_steps=4)
BIG=(--set "data.text.val_path=$tmp/text/val_small.txt" --set model.gpt.d_model=512 --set model.gpt.layers=16
     --set model.gpt.heads=8 --set data.global_batch_size=8 --set train.total_steps=4 --set schedule.warmup_steps=1
     --set collective.bucket_cap_mb=8)
TINY=(--set "data.text.val_path=$tmp/text/val_small.txt" --set model.gpt.d_model=32 --set model.gpt.layers=1
      --set model.gpt.heads=2 --set train.total_steps=4 --set schedule.warmup_steps=1)
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

# One launch; prints "<peak RSS MiB> <activations MiB> <gathered MiB> <train s> <evaluation MiB>" (largest over workers).
run() {
  local dir=$1 n=$2
  shift 2
  rm -rf "$dir"
  build/bin/shardline launch --config $CFG --workers "$n" --workdir "$dir" "${COMMON[@]}" "$@" > "$dir.log" 2>&1 \
    || { tail -20 "$dir.log" >&2; return 1; }
  /usr/bin/python3 - "$dir" "$n" << 'EOF'
import re, sys
d, n = sys.argv[1], int(sys.argv[2])
rss = act = gathered = secs = ev = 0.0
for r in range(n):
    t = open(f"{d}/logs/worker-{r}.log").read()
    line = [l for l in t.splitlines() if "finished" in l and "(RSS)" in l][-1]
    rss = max(rss, float(re.search(r"peak ([\d.]+) MiB \(RSS\)", line).group(1)))
    act = max(act, float(re.search(r"activations ([\d.]+) MiB", line).group(1)))
    ev = max(ev, float(re.search(r"evaluation \+([\d.]+) MiB", line).group(1)))
    p, peak = map(float, re.search(r"parameters ([\d.]+) MiB \(([\d.]+) MiB at the step's peak", line).groups())
    gathered = max(gathered, peak - p)
    secs = max(secs, float(re.search(r"of ([\d.]+) s of training\)", line).group(1)))
print(f"{rss:.1f} {act:.1f} {gathered:.1f} {secs:.2f} {ev:.1f}")
EOF
}

params_of() {  # parameter count from a run's log
  grep -o "with [0-9]* parameters" "$1/logs/worker-0.log" | head -1 | grep -o "[0-9]*"
}

if [[ " $PARTS " == *" 1 "* ]]; then
  echo "== baseline: a 1-layer, d=32 GPT" >&2
  read -r base _ _ _ _ < <(run "$OUT/tiny" 1 "${TINY[@]}")
  echo "baseline $base" > "$OUT/baseline.txt"
  printf "size N stage remat peak_rss_mib predicted_mib state_mib gathered_mib activations_mib train_s evaluation_mib\n" > "$OUT/memory.dat"
  for size in small big; do
    if [[ $size == small ]]; then sets=("${SMALL[@]}"); else sets=("${BIG[@]}"); fi
    for n in 1 2 4; do
      for stage in 2 3; do
        for remat in false true; do
          name="${size}_n${n}_s${stage}_$remat"
          echo "== $name" >&2
          read -r rss act gathered secs evact < <(run "$OUT/$name" "$n" "${sets[@]}" --set "collective.zero_stage=$stage" \
                                              --set "train.remat=$remat")
          p=$(params_of "$OUT/$name")
          state=$(/usr/bin/python3 -c "p,n,s=$p,$n,$stage; print(f'{(16*p/n if s==3 else 8*p+8*p/n)/2**20:.1f}')")
          pred=$(/usr/bin/python3 -c "p,n,s=$p,$n,$stage; ev=(4*p*(1-1/n)/2**20 if s==3 else 0)+$evact; print(f'{$state + max(2*$gathered, ev) + $act + $base:.1f}')")
          echo "$size $n $stage $remat $rss $pred $state $gathered $act $secs $evact" >> "$OUT/memory.dat"
        done
      done
    done
  done
  gnuplot -e "dat='$OUT/memory.dat'; out='bench/zero3_memory.png'" bench/lib/zero3_memory.gp
fi

if [[ " $PARTS " == *" 2 "* ]]; then
  [[ -w /sys/fs/cgroup/memory ]] || { echo "part 2 needs cgroup v1's memory controller writable (root)" >&2; exit 1; }
  . bench/lib/capped_job.sh
  # One job of 4 workers, each in its own capped group (bench/lib/capped_job.sh;
  # the worker's own PID goes into its group before it execs, so every byte it
  # allocates is charged there); bounded at 20 minutes.
  capped() {
    local stage=$1 dir="$OUT/capped_s$1" outcome
    outcome=$(capped_job "$dir" "$CAP_MB" 4 1200 $CFG "${COMMON[@]}" "${BIG[@]}" \
      --set "collective.zero_stage=$stage" --set train.remat=true)
    [[ $outcome == finished ]] && outcome=trained
    echo "| $stage | $CAP_MB MiB | $outcome | $(awk '{printf " %s", $5}' "$dir/memory.dat") |"
  }
  {
    echo "| ZeRO stage | cap per worker | outcome | each worker's peak charge, MiB |"
    echo "| --- | --- | --- | --- |"
    capped 3
    capped 2
  } | tee "$OUT/capped.md"
fi

if [[ " $PARTS " == *" 3 "* ]]; then
  STEPS_BIG=${STEPS_BIG:-24}
  STEPS_SMALL=${STEPS_SMALL:-160}
  REPS=${REPS:-1}
  STEP_SIZES=${STEP_SIZES:-small big}
  echo "size N remat stage rep step_ms compute_ms reduce_scatter_ms allgather_ms background_ms hidden_ms" \
    > "$OUT/step_time.dat"
  for size in $STEP_SIZES; do
    if [[ $size == small ]]; then
      sets=("${SMALL[@]}" --set "train.total_steps=$STEPS_SMALL" --set "train.log_every=$((STEPS_SMALL / 6))")
    else
      sets=("${BIG[@]}" --set "train.total_steps=$STEPS_BIG" --set "train.log_every=$((STEPS_BIG / 6))")
    fi
    for n in 2 4; do
      for remat in false true; do
        for rep in $(seq 1 "$REPS"); do
          for stage in 2 3; do
            name="time_${size}_n${n}_${remat}_s${stage}_r$rep"
            echo "== $name" >&2
            rm -rf "${OUT:?}/$name"
            build/bin/shardline launch --config $CFG --workers "$n" --workdir "$OUT/$name" "${COMMON[@]}" "${sets[@]}" \
              --set "collective.zero_stage=$stage" --set "train.remat=$remat" > "$OUT/$name.log" 2>&1 \
              || { tail -20 "$OUT/$name.log" >&2; exit 1; }
            /usr/bin/python3 bench/lib/zero3_step_time.py "$OUT/$name" "$n" "$size $n $remat $stage $rep" \
              | tee -a "$OUT/step_time.dat" >&2
          done
        done
      done
    done
  done
fi

if [[ -f $OUT/memory.dat || -f $OUT/step_time.dat ]]; then
  /usr/bin/python3 bench/lib/summarize_zero3.py "$OUT" | tee "$OUT/summary.md"
fi
