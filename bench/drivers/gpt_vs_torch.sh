#!/usr/bin/env bash
# shardline's GPT against PyTorch (python3-torch, OMP_NUM_THREADS=1).
# 1. Correctness: from the same initial weights and the same batches,
#    PyTorch's GPT with nanoGPT's names (bench/peers/torch_gpt.py) must give
#    shardline's logits (within 1e-4 of the largest) and shardline's first
#    20 training losses (within 1e-3 relative).
# 2. Speed, deploy/configs/austen_gpt.textproto for STEPS steps (default:
#    the config's 3000; its schedule is scaled to STEPS): tokens/s at N=1
#    (`shardline train` vs a PyTorch loop, both pinned to one core) and at
#    N=2 (`shardline launch --workers 2` vs DDP over gloo), PyTorch from
#    shardline's initial parameters on shardline's batches (the same
#    tokens in the same order), validation loss every STEPS/6 steps, the
#    time each reaches the worse of the two final losses (and 2.2 bits per
#    byte, when both do), MFU against the one-thread sgemm peak of the
#    same run.
# One command (the full runs take about 2 hours here):
#   bench/drivers/gpt_vs_torch.sh
#   STEPS=120 bench/drivers/gpt_vs_torch.sh      # the speed part in ~15 minutes
#   NS=2 bench/drivers/gpt_vs_torch.sh            # only N=2 (the full config: ~30 minutes)
set -euo pipefail
cd "$(dirname "$0")/../.."
./deploy/install-deps.sh --test
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends python3-torch python3-numpy > /dev/null
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DSHARDLINE_BUILD_BENCH=ON > /dev/null
cmake --build build -j2 --target shardline_cli shardline_worker_bin shardline_coordinator_bin gpt_reference sgemm_bench > /dev/null
out="$(mktemp -d /tmp/gpt_vs_torch.XXXXXX)"
trap 'rm -rf "$out"' EXIT
./build/bin/shardline data austen --out "$out/text" > /dev/null
steps=20
sets=(--set "data.text.train_path=$out/text/train.txt" --set "data.text.val_path=$out/text/val.txt"
      --set "train.total_steps=$steps" --set train.log_every=1 --set train.eval_every=0
      --set runtime.num_workers=1 --set checkpoint.save_final=false)
./build/bin/shardline-gpt-reference --config deploy/configs/austen_gpt.textproto --steps "$steps" --out "$out/ref" "${sets[@]}"
./build/bin/shardline train --config deploy/configs/austen_gpt.textproto --workdir "$out/run" "${sets[@]}" > "$out/train.log" 2>&1 \
  || { tail -20 "$out/train.log"; exit 1; }
(cd bench/peers && OMP_NUM_THREADS=1 /usr/bin/python3 torch_gpt.py check --ref "$out/ref" --metrics "$out/run/metrics.jsonl") \
  | tee "$out/check.json"

# 2. Speed.
OUT=bench/out/gpt
STEPS=${STEPS:-3000}
CORE=${CORE:-1}
EVAL=$((STEPS / 6))
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
rm -rf "$OUT" && mkdir -p "$OUT" && cp "$out/check.json" "$OUT/"
CFG=deploy/configs/austen_gpt.textproto
RUN=(--set "data.text.train_path=$out/text/train.txt" --set "data.text.val_path=$out/text/val.txt"
     --set "train.total_steps=$STEPS" --set "train.eval_every=$EVAL" --set checkpoint.every_steps=0
     --set "schedule.warmup_steps=$((STEPS < 3000 ? STEPS / 30 : 100))")
# PyTorch starts from shardline's initial parameters and sees shardline's
# batches, step by step: the same config and the same tokens.
./build/bin/shardline-gpt-reference --config $CFG --steps "$STEPS" --out "$out/ref_speed" "${RUN[@]}" >&2
TORCH=(--train "$out/text/train.txt" --val "$out/text/val.txt" --steps "$STEPS" --eval_every "$EVAL"
       --warmup "$((STEPS < 3000 ? STEPS / 30 : 100))" --ref "$out/ref_speed")
PIN="taskset -c $CORE"
. bench/lib/ddp_local.sh
echo "== sgemm peak (1 thread, core $CORE)" >&2
$PIN build/bench/sgemm_bench --benchmark_filter='BM_Sgemm/1024' --benchmark_format=json \
  --benchmark_repetitions=3 > "$OUT/sgemm.json"
NS=${NS:-1 2}
if [[ " $NS " == *" 1 "* ]]; then
  echo "== N=1 shardline" >&2
  $PIN build/bin/shardline train --config $CFG --workdir "$OUT/n1_shardline" --set runtime.num_workers=1 "${RUN[@]}" \
    2> "$OUT/n1_shardline.log"
  echo "== N=1 torch" >&2
  $PIN /usr/bin/python3 bench/peers/torch_gpt.py train "${TORCH[@]}" > "$OUT/n1_torch.jsonl"
fi
if [[ " $NS " == *" 2 "* ]]; then
  echo "== N=2 shardline" >&2
  build/bin/shardline launch --config $CFG --workers 2 --workdir "$OUT/n2_shardline" "${RUN[@]}" 2> "$OUT/n2_shardline.log"
  echo "== N=2 DDP" >&2
  ddp_local bench/peers/torch_gpt.py 2 train "${TORCH[@]}" > "$OUT/n2_ddp.jsonl"
fi
/usr/bin/python3 bench/lib/summarize_gpt.py "$OUT"
