#!/usr/bin/env bash
# Every byte a worker holds, predicted and measured (issue 48; docs/operations.md, "Memory"):
# 1. The memory plan's total against each worker's peak RSS (the final log
#    line: "memory predicted X MiB, peak Y MiB (RSS)", the largest over the
#    workers) for every config in deploy/configs and the 50.6M GPT of the
#    ZeRO-3 bench (d_model 512, 16 layers, batch 8), at N = 1, 2, 4 and ZeRO
#    stage 2 and 3: STEPS steps (default 9) with a save and an in-memory
#    snapshot every STEPS/3 (three: the plan's steady state holds two
#    snapshot steps while a third is taken), the final evaluation on the whole test split
#    (the GPTs': 64 KiB of validation text). A table, and the curve drawn by
#    gnuplot into bench/memory_plan.png.
# 2. The largest GPT (width at 16 layers, 8 heads) that trains,
#    evaluates and saves at N = 4 with each worker in its own cgroup v1
#    memory group capped at CAP_MB (default 520), at stage 3 with remat, no
#    in-memory snapshots, synchronous saves and 4 MiB buckets, in each of
#    PRECISIONS (default "FP32 BF16"): the widest whose plan fits with the
#    default margin (shardline plan, searched by 16s), run under the cap (3
#    steps, the final evaluation, the final save), and the next width, which
#    each worker refuses before training; then, with
#    runtime.memory_margin_percent=0 so the plan refuses nothing under the
#    cap itself, wider by 16s until a worker is killed for memory: the
#    widest that really trains under the cap. Against the bound: (cap - the
#    fixed cost - activations) / (16 bytes / N) parameters.
# 3. The default MLP's peak RSS per worker (fmnist_mlp, N = 2).
# One command (about 25 minutes here; root for part 2):
#   bench/drivers/memory_bound_bench.sh
#   PARTS="1 3" bench/drivers/memory_bound_bench.sh   # no cgroups
set -euo pipefail
cd "$(dirname "$0")/../.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build build -j2 --target shardline_cli shardline_worker_bin shardline_coordinator_bin > /dev/null
OUT=bench/out/memory
PARTS=${PARTS:-1 2 3}
CAP_MB=${CAP_MB:-520}
STEPS=${STEPS:-9}
PRECISIONS=${PRECISIONS:-FP32 BF16}
mkdir -p "$OUT"
tmp="$(mktemp -d /tmp/memory_bench.XXXXXX)"
trap 'rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
./build/bin/shardline data austen --out "$tmp/text" > /dev/null
head -c 65536 "$tmp/text/val.txt" > "$tmp/text/val_64k.txt"
TEXT=(--set "data.text.train_path=$tmp/text/train.txt" --set "data.text.val_path=$tmp/text/val_64k.txt")
BIG=(--set model.gpt.d_model=512 --set model.gpt.layers=16 --set model.gpt.heads=8 --set data.global_batch_size=8
     --set collective.bucket_cap_mb=8)

# "<predicted MiB> <peak RSS MiB>" of a launch's workers (the largest of each).
peaks() {
  /usr/bin/python3 - "$1" "$2" << 'PY'
import re, sys
d, n = sys.argv[1], int(sys.argv[2])
pred = peak = 0.0
for r in range(n):
    t = open(f"{d}/logs/worker-{r}.log").read()
    m = re.findall(r"memory predicted ([\d.]+) MiB, peak ([\d.]+) MiB \(RSS\)", t)
    pred, peak = max(pred, float(m[-1][0])), max(peak, float(m[-1][1]))
print(f"{pred:.1f} {peak:.1f}")
PY
}

if [[ " $PARTS " == *" 1 "* ]]; then
  echo "model N stage predicted_mib peak_mib" > "$OUT/plan.dat"
  third=$((STEPS / 3))
  for model in fmnist_mlp fmnist_cnn fmnist_vit austen_gpt gpt50m; do
    cfg=deploy/configs/$model.textproto
    sets=()
    if [[ $model == gpt50m ]]; then cfg=deploy/configs/austen_gpt.textproto; sets=("${TEXT[@]}" "${BIG[@]}"); fi
    if [[ $model == austen_gpt ]]; then sets=("${TEXT[@]}"); fi
    for n in 1 2 4; do
      for stage in 2 3; do
        name="${model}_n${n}_s${stage}"
        echo "== $name" >&2
        rm -rf "${OUT:?}/$name"
        build/bin/shardline launch --config "$cfg" --workers "$n" --workdir "$OUT/$name" "${sets[@]}" \
          --set "train.total_steps=$STEPS" --set schedule.warmup_steps=1 --set train.eval_every=0 \
          --set "checkpoint.every_steps=$third" --set "checkpoint.memory_every_steps=$third" \
          --set "collective.zero_stage=$stage" --set runtime.watchdog_timeout_seconds=900 > "$OUT/$name.log" 2>&1 \
          || { tail -20 "$OUT/$name.log" >&2; exit 1; }
        read -r pred peak < <(peaks "$OUT/$name" "$n")
        echo "$model $n $stage $pred $peak" | tee -a "$OUT/plan.dat" >&2
      done
    done
  done
  gnuplot -e "dat='$OUT/plan.dat'; out='bench/memory_plan.png'" bench/lib/memory_plan.gp
fi

if [[ " $PARTS " == *" 2 "* ]]; then
  [[ -w /sys/fs/cgroup/memory ]] || { echo "part 2 needs cgroup v1's memory controller writable (root)" >&2; exit 1; }
  CAPPED=("${TEXT[@]}" --set model.gpt.layers=16 --set data.global_batch_size=8 --set collective.bucket_cap_mb=4
          --set collective.zero_stage=3 --set train.remat=true --set checkpoint.memory_every_steps=0
          --set checkpoint.async=false --set checkpoint.every_steps=0 --set checkpoint.save_final=true
          --set checkpoint.best_metric= --set train.eval_every=0 --set train.total_steps=3 --set schedule.warmup_steps=1
          --set runtime.watchdog_timeout_seconds=900)
  width_sets() { echo "--set model.gpt.d_model=$1 --set model.gpt.heads=8"; }
  fits() {  # fits PRECISION WIDTH MARGIN: the plan of 4 workers within the cap less MARGIN percent
    # shellcheck disable=SC2046
    build/bin/shardline plan --config deploy/configs/austen_gpt.textproto --workers 4 "${CAPPED[@]}" \
      --set "train.precision=$1" $(width_sets "$2") --set "runtime.memory_limit_mb=$CAP_MB" \
      --set "runtime.memory_margin_percent=$3" > /dev/null 2>&1
  }
  widest() {  # widest PRECISION MARGIN: the widest d_model (by 16s) whose plan fits, or nothing
    local width=496
    while fits "$1" $((width + 16)) "$2"; do width=$((width + 16)); done
    [[ $width -gt 496 ]] && echo "$width"
  }
  term() {  # term PRECISION WIDTH NAME: MiB of one plan term
    # shellcheck disable=SC2046
    build/bin/shardline plan --config deploy/configs/austen_gpt.textproto --workers 4 "${CAPPED[@]}" \
      --set "train.precision=$1" $(width_sets "$2") | awk -v t="$3" '$1 == t {print $2}'
  }
  . bench/lib/capped_job.sh
  capped() {  # capped PRECISION WIDTH MARGIN: one job of 4 workers, each in its own capped group; prints the outcome
    local precision=$1 width=$2 margin=$3 dir="$OUT/capped_${1}_d$2_m$3" outcome
    # shellcheck disable=SC2046
    outcome=$(capped_job "$dir" "$CAP_MB" 4 1500 deploy/configs/austen_gpt.textproto "${CAPPED[@]}" \
      --set "train.precision=$precision" $(width_sets "$width") --set "runtime.memory_margin_percent=$margin")
    case $outcome in
      finished) outcome="trained, evaluated, saved" ;;
      failed) outcome="refused" ;;
      "killed for memory") outcome="killed for memory (worker$(awk '$6 > 0 {printf " %s", $1}' "$dir/memory.dat"))" ;;
    esac
    local charge params predicted=""
    charge=$(awk '{printf " %s", $5}' "$dir/memory.dat")
    params=$(cat "$dir"/logs/worker-*.log 2> /dev/null | grep -o "with [0-9]* parameters" | head -1 | grep -o "[0-9]*" || true)
    predicted=$(grep -ho "memory predicted [0-9.]* MiB, peak [0-9.]* MiB" "$dir"/logs/worker-*.log | head -1 || true)
    if [[ $outcome == refused ]]; then
      outcome="refused: $(grep -o "this job needs about [0-9.]* MiB" "$dir/logs/coordinator.log" | head -1)"
    fi
    ls "$dir/work/checkpoints" 2> /dev/null | grep -q step_ || [[ $outcome != trained* ]] || outcome="$outcome (no checkpoint!)"
    echo "| $precision | $margin% | $width | ${params:-} | $outcome | $charge | $predicted |"
  }
  rm -f "$OUT/bound.dat"
  {
    echo "| precision | plan margin | d_model (16 layers, 8 heads) | parameters | outcome under $CAP_MB MiB | each worker's peak charge, MiB | final log line |"
    echo "| --- | --- | --- | --- | --- | --- | --- |"
    for precision in $PRECISIONS; do
      planned=$(widest "$precision" 10) || { echo "| $precision | 10% | even d_model 512 does not fit |"; continue; }
      width=$planned
      capped "$precision" "$width" 10
      capped "$precision" $((width + 16)) 10
      # The bound: (cap - fixed - activations) / 16 bytes * N.
      act=$(term "$precision" "$width" activations)
      fixed=$(term "$precision" "$width" fixed)
      echo "$precision 10 $width $act $fixed" >> "$OUT/bound.dat"
      # What really trains under the cap, the plan's margin set to 0: wider
      # by 16s from the plan's choice until a worker is killed (or the plan
      # is over the cap itself).
      trained=$planned
      while fits "$precision" $((width + 16)) 0; do
        width=$((width + 16))
        row=$(capped "$precision" "$width" 0)
        echo "$row"
        [[ $row == *"trained, evaluated, saved |"* ]] || break
        trained=$width
      done
      if [[ $trained -gt $planned ]]; then
        echo "$precision 0 $trained $(term "$precision" "$trained" activations) $(term "$precision" "$trained" fixed)" >> "$OUT/bound.dat"
      fi
    done
  } | tee "$OUT/capped.md"
  /usr/bin/python3 - "$OUT" "$CAP_MB" << 'PY' | tee -a "$OUT/capped.md"
import re, sys
out, cap = sys.argv[1], float(sys.argv[2])
rows = [l.split() for l in open(f"{out}/bound.dat")]
md = open(f"{out}/capped.md").read()
for precision, margin, width, act, fixed in rows:
    m = re.search(rf"\| {precision} \| {margin}% \| {width} \| (\d+) \| trained", md)
    if not m:
        continue
    p = int(m.group(1))
    bound = (cap - float(fixed) - float(act)) * 2**20 / 16 * 4
    print(f"{precision}, margin {margin}%: d_model {width}, {p / 1e6:.1f}M parameters; bound {bound / 1e6:.1f}M ((cap - {fixed} fixed - {act} activations MiB) / 16 B x 4); {p / bound:.2f}x")
PY
fi

if [[ " $PARTS " == *" 3 "* ]]; then
  rm -rf "$OUT/mlp"
  build/bin/shardline launch --config deploy/configs/fmnist_mlp.textproto --workers 2 --workdir "$OUT/mlp" \
    --set train.total_steps=200 > "$OUT/mlp.log" 2>&1 || { tail -20 "$OUT/mlp.log" >&2; exit 1; }
  echo "MLP (fmnist_mlp, N=2): $(peaks "$OUT/mlp" 2) (predicted, peak RSS MiB)" | tee "$OUT/mlp.txt"
fi
