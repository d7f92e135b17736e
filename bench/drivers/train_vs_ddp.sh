#!/usr/bin/env bash
# Issue 4 side by side: `shardline launch --workers N` against PyTorch 1.13
# DDP with the gloo backend (Debian's python3-torch, OMP_NUM_THREADS=1,
# torch.set_num_threads(1)), same model, global batch, optimizer, schedule
# and data; plus shardline's scaling and per-worker optimizer-state bytes.
#
#   bench/drivers/train_vs_ddp.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=bench/out/ddp
W2_STEPS=${W2_STEPS:-200}
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

/usr/bin/python3 -c "import torch" 2>/dev/null || {
  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-torch python3-numpy; }
./deploy/install-deps.sh --test
[ -x build/bin/shardline-worker ] || { cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build -j2; }
rm -rf "$OUT" && mkdir -p "$OUT"
CFG=deploy/configs/fmnist_mlp.textproto
W2="--set model.mlp.hidden_sizes=2048,2048 --set data.global_batch_size=256 --set train.total_steps=$W2_STEPS --set train.log_every=20 --set train.eval_every=0"

. bench/lib/ddp_local.sh

echo "== W1 shardline N=2" >&2
build/bin/shardline launch --config $CFG --workers 2 --workdir "$OUT/w1_n2" 2> "$OUT/w1_n2.log"
echo "== W1 DDP N=2" >&2
ddp_local bench/peers/torch_ddp.py 2 > "$OUT/w1_ddp.jsonl"
for n in 1 2 4; do
  echo "== W2 shardline N=$n" >&2
  build/bin/shardline launch --config $CFG --workers $n --workdir "$OUT/w2_n$n" $W2 2> "$OUT/w2_n$n.log"
done
echo "== W2 DDP N=2" >&2
ddp_local bench/peers/torch_ddp.py 2 --hidden 2048,2048 --batch 256 --steps $W2_STEPS --eval_every 1000000 > "$OUT/w2_ddp.jsonl"

/usr/bin/python3 bench/lib/summarize_ddp.py "$OUT"
