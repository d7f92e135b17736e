#!/usr/bin/env bash
# train.precision BF16 (bfloat16 products through oneDNN, float32 master
# state) against shardline FP32 and against PyTorch (python3-torch 1.13,
# OMP_NUM_THREADS=1) in float32 and with torch.autocast("cpu",
# dtype=torch.bfloat16), the same OPENBLAS_CORETYPE for every process.
# 1. Correctness: from the same initial weights and batches, PyTorch's
#    autocast and shardline BF16 give the first batch's logits within 1e-2
#    of the largest and 20 training losses within 1e-2 relative
#    (torch_gpt.py check --autocast; gpt_vs_torch.sh keeps float32's check).
# 2. Speed, STEPS steps of each GPT: austen_gpt (d 128) and a wider one
#    (d_model 512, 8 heads, batch 8): tokens/s at N=1 (`shardline train`,
#    PyTorch, pinned to one core) and N=2 (`shardline launch --workers 2`,
#    DDP over gloo), from the same initial parameters on the same tokens in
#    the same order; MFU against the one-thread peaks of the same run
#    (OpenBLAS sgemm for float32, oneDNN bfloat16 for BF16 and autocast, a
#    1024^3 product each); the final validation loss; peak RSS per worker.
# One command (about 20 minutes here):
#   bench/drivers/precision_bench.sh
#   STEPS=20 MODELS=small bench/drivers/precision_bench.sh     # a quick look
set -euo pipefail
cd "$(dirname "$0")/../.."
./deploy/install-deps.sh --test
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends python3-torch python3-numpy > /dev/null
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DSHARDLINE_BUILD_BENCH=ON > /dev/null
cmake --build build -j2 --target shardline_cli shardline_worker_bin shardline_coordinator_bin gpt_reference sgemm_bench > /dev/null
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-Haswell}
tmp="$(mktemp -d /tmp/precision_bench.XXXXXX)"
trap 'rm -rf "$tmp"' EXIT
./build/bin/shardline data austen --out "$tmp/text" > /dev/null
CFG=deploy/configs/austen_gpt.textproto
TEXT=(--set "data.text.train_path=$tmp/text/train.txt" --set "data.text.val_path=$tmp/text/val.txt")
OUT=bench/out/precision
rm -rf "$OUT" && mkdir -p "$OUT"

# 1. Correctness.
sets=("${TEXT[@]}" --set train.total_steps=20 --set train.log_every=1 --set train.eval_every=0
      --set runtime.num_workers=1 --set checkpoint.save_final=false --set train.precision=BF16)
./build/bin/shardline-gpt-reference --config $CFG --steps 20 --out "$tmp/ref" "${sets[@]}" >&2
./build/bin/shardline train --config $CFG --workdir "$tmp/run" "${sets[@]}" > "$tmp/train.log" 2>&1 \
  || { tail -20 "$tmp/train.log"; exit 1; }
(cd bench/peers && /usr/bin/python3 torch_gpt.py check --autocast --ref "$tmp/ref" --metrics "$tmp/run/metrics.jsonl") \
  > "$OUT/check.json"

# 2. Speed. The final evaluation reads the first 64 KiB of the validation
# novel (both sides: the same windows), so the wide model's runs are not
# mostly evaluation; tokens/s counts training time only either way.
head -c 65536 "$tmp/text/val.txt" > "$tmp/text/val_64k.txt"
TEXT=(--set "data.text.train_path=$tmp/text/train.txt" --set "data.text.val_path=$tmp/text/val_64k.txt")
STEPS=${STEPS:-60}
CORE=${CORE:-1}
PIN="taskset -c $CORE"
. bench/lib/ddp_local.sh
echo "== peaks (1 thread, core $CORE)" >&2
$PIN build/bench/sgemm_bench --benchmark_filter='BM_(Sgemm|BfloatGemm|DnnlFloatGemm)/1024' --benchmark_format=json \
  --benchmark_repetitions=3 > "$OUT/peaks.json"
for model in ${MODELS:-small wide}; do
  case $model in
    small) M=(); T=() ;;
    wide) M=(--set model.gpt.d_model=512 --set model.gpt.heads=8 --set data.global_batch_size=8)
          T=(--d_model 512 --heads 8 --batch 8) ;;
  esac
  RUN=("${TEXT[@]}" "${M[@]}" --set "train.total_steps=$STEPS" --set "train.eval_every=$STEPS"
       --set checkpoint.every_steps=0 --set checkpoint.save_final=false --set "schedule.warmup_steps=$((STEPS / 10))")
  ./build/bin/shardline-gpt-reference --config $CFG --steps "$STEPS" --out "$tmp/ref_$model" "${RUN[@]}" >&2
  TORCH=(--train "$tmp/text/train.txt" --val "$tmp/text/val_64k.txt" --steps "$STEPS" --eval_every "$STEPS"
         --warmup "$((STEPS / 10))" --ref "$tmp/ref_$model" "${T[@]}")
  for p in FP32 BF16; do
    echo "== $model N=1 shardline $p" >&2
    $PIN build/bin/shardline train --config $CFG --workdir "$OUT/${model}_n1_shardline_$p" --set runtime.num_workers=1 \
      --set "train.precision=$p" "${RUN[@]}" 2> "$OUT/${model}_n1_shardline_$p.log"
    echo "== $model N=2 shardline $p" >&2
    build/bin/shardline launch --config $CFG --workers 2 --workdir "$OUT/${model}_n2_shardline_$p" \
      --set "train.precision=$p" "${RUN[@]}" 2> "$OUT/${model}_n2_shardline_$p.log"
  done
  for p in FP32 BF16; do
    flag=(); [ $p = BF16 ] && flag=(--autocast)
    echo "== $model N=1 torch $p" >&2
    $PIN /usr/bin/python3 bench/peers/torch_gpt.py train "${TORCH[@]}" "${flag[@]}" > "$OUT/${model}_n1_torch_$p.jsonl"
    echo "== $model N=2 DDP $p" >&2
    ddp_local bench/peers/torch_gpt.py 2 train "${TORCH[@]}" "${flag[@]}" > "$OUT/${model}_n2_torch_$p.jsonl"
  done
done
/usr/bin/python3 bench/lib/summarize_precision.py "$OUT" "${MODELS:-small wide}" | tee "$OUT/summary.md"
