#!/usr/bin/env bash
# Issue 2 side by side: `shardline train` against PyTorch 1.13 (Debian's
# python3-torch), both on one thread pinned to one core, same model, data,
# batch, optimizer and schedule.
#
#   bench/drivers/train_vs_torch.sh            # W1 full 15-epoch run + W2 steady state
#   CORE=0 bench/drivers/train_vs_torch.sh     # pin to another core
#
# Writes raw outputs to bench/out/train/ and prints a summary (markdown).
set -euo pipefail
cd "$(dirname "$0")/../.."
CORE=${CORE:-1}
W2_STEPS=${W2_STEPS:-300}
OUT=bench/out/train
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1

if ! /usr/bin/python3 -c "import torch" 2>/dev/null; then
  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-torch python3-numpy
fi
./deploy/install-deps.sh --test
if [ ! -x build/bin/shardline ] || [ ! -x build/bench/sgemm_bench ]; then
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build -j2
fi
rm -rf "$OUT" && mkdir -p "$OUT"
PIN="taskset -c $CORE"
CFG=deploy/configs/fmnist_mlp.textproto

echo "== sgemm peak (1 thread, core $CORE)" >&2
$PIN build/bench/sgemm_bench --benchmark_filter='BM_Sgemm/1024' --benchmark_format=json \
  --benchmark_repetitions=3 > "$OUT/sgemm.json"

echo "== W1 shardline" >&2
$PIN build/bin/shardline train --config $CFG --workdir "$OUT/w1_shardline" 2> "$OUT/w1_shardline.log"
echo "== W1 torch" >&2
$PIN /usr/bin/python3 bench/peers/torch_mlp.py > "$OUT/w1_torch.jsonl"

echo "== W2 shardline" >&2
$PIN build/bin/shardline train --config $CFG --workdir "$OUT/w2_shardline" \
  --set model.mlp.hidden_sizes=2048,2048 --set data.global_batch_size=256 \
  --set train.total_steps=$W2_STEPS --set train.log_every=25 --set train.eval_every=0 \
  2> "$OUT/w2_shardline.log"
echo "== W2 torch" >&2
$PIN /usr/bin/python3 bench/peers/torch_mlp.py --hidden 2048,2048 --batch 256 --steps $W2_STEPS \
  --eval_every 1000000 > "$OUT/w2_torch.jsonl"

/usr/bin/python3 bench/lib/summarize_train.py "$OUT"
