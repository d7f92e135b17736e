#!/usr/bin/env bash
# Issue 17 side by side: the CNN of deploy/configs/fmnist_cnn.textproto in
# shardline against the same network in PyTorch 1.13 (Debian's
# python3-torch: oneDNN convolutions; OMP_NUM_THREADS=1, one thread per
# process), same data, global batch, init, optimizer and schedule:
#   N=1: `shardline train` vs a plain PyTorch loop, both pinned to one core;
#   N=2: `shardline launch --workers 2` vs DDP (gloo), 2 processes.
# Then: PyTorch loads shardline's export and must match its test accuracy;
# MFU against the one-thread sgemm peak measured in the same run; and (when
# `perf` is installed) the share of the step in im2col/col2im vs sgemm.
#
#   bench/drivers/cnn_vs_torch.sh              # the full 10-epoch schedule (~20 min)
#   EPOCHS=1 bench/drivers/cnn_vs_torch.sh     # a smoke run
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=bench/out/cnn
EPOCHS=${EPOCHS:-10}
CORE=${CORE:-1}
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1

/usr/bin/python3 -c "import torch" 2>/dev/null || {
  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-torch python3-numpy; }
./deploy/install-deps.sh --test
[ -x build/bin/shardline ] && [ -x build/bench/sgemm_bench ] || {
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build -j2; }
rm -rf "$OUT" && mkdir -p "$OUT"
CFG=deploy/configs/fmnist_cnn.textproto
RUN="--set train.epochs=$EPOCHS --set checkpoint.every_steps=0"
PIN="taskset -c $CORE"

. bench/lib/ddp_local.sh

echo "== sgemm peak (1 thread, core $CORE)" >&2
$PIN build/bench/sgemm_bench --benchmark_filter='BM_Sgemm/1024' --benchmark_format=json \
  --benchmark_repetitions=3 > "$OUT/sgemm.json"
echo "== N=1 shardline" >&2
$PIN build/bin/shardline train --config $CFG --workdir "$OUT/n1_shardline" --set runtime.num_workers=1 $RUN \
  2> "$OUT/n1_shardline.log"
echo "== N=1 torch" >&2
$PIN /usr/bin/python3 bench/peers/torch_cnn.py --epochs "$EPOCHS" > "$OUT/n1_torch.jsonl"
echo "== N=2 shardline" >&2
build/bin/shardline launch --config $CFG --workers 2 --workdir "$OUT/n2_shardline" $RUN 2> "$OUT/n2_shardline.log"
echo "== N=2 DDP" >&2
ddp_local bench/peers/torch_cnn.py 2 --epochs "$EPOCHS" > "$OUT/n2_ddp.jsonl"

echo "== PyTorch loads shardline's export" >&2
build/bin/shardline ckpt export "$OUT/n2_shardline" --step latest --out "$OUT/n2.safetensors" >&2
PYTHONPATH=bench/peers /usr/bin/python3 bench/peers/torch_cnn.py --check_export "$OUT/n2.safetensors" > "$OUT/export.jsonl"

if command -v perf > /dev/null; then
  echo "== profile: 100 steps of N=1" >&2
  $PIN perf record -o "$OUT/perf.data" -- build/bin/shardline train --config $CFG --workdir "$OUT/profile" \
    --set runtime.num_workers=1 --set train.total_steps=100 --set train.eval_every=0 --set checkpoint.every_steps=0 \
    2> /dev/null
  perf report -i "$OUT/perf.data" --no-children --sort symbol --stdio 2> /dev/null > "$OUT/perf.txt"
fi

/usr/bin/python3 bench/lib/summarize_cnn.py "$OUT"
