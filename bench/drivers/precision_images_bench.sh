#!/usr/bin/env bash
# train.precision BF16 on the image models: the CNN (deploy/configs/
# fmnist_cnn.textproto) and the ViT (fmnist_vit.textproto) against
# shardline FP32 and against PyTorch (python3-torch 1.13, OMP_NUM_THREADS=1;
# bench/peers/torch_cnn.py, torch_vit.py) in float32 and with
# torch.autocast("cpu", dtype=torch.bfloat16).
# Samples/s at N=1 (pinned to one core) and N=2 (PyTorch: DDP over gloo),
# test accuracy after EPOCHS epochs (the shipped schedules squeezed into
# them), the same OPENBLAS_CORETYPE for every process.
#   bench/drivers/precision_images_bench.sh             # 1 epoch each (~15 minutes)
#   EPOCHS=10 bench/drivers/precision_images_bench.sh   # the CNN's full schedule
#   MODELS=vit bench/drivers/precision_images_bench.sh  # one model
set -euo pipefail
cd "$(dirname "$0")/../.."
./deploy/install-deps.sh --test
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends python3-torch python3-numpy > /dev/null
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DSHARDLINE_BUILD_BENCH=ON > /dev/null
cmake --build build -j2 --target shardline_cli shardline_worker_bin shardline_coordinator_bin > /dev/null
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-Haswell}
OUT=bench/out/precision_images
EPOCHS=${EPOCHS:-1}
CORE=${CORE:-1}
PIN="taskset -c $CORE"
rm -rf "$OUT" && mkdir -p "$OUT"
. bench/lib/ddp_local.sh
RUN=(--set "train.epochs=$EPOCHS" --set checkpoint.every_steps=0 --set checkpoint.save_final=false
     --set "train.eval_every=0")
MODELS=${MODELS:-"cnn vit"}
for model in $MODELS; do
  for p in FP32 BF16; do
    echo "== $model N=1 shardline $p" >&2
    $PIN build/bin/shardline train --config "deploy/configs/fmnist_$model.textproto" --workdir "$OUT/${model}_n1_$p" \
      --set runtime.num_workers=1 --set "train.precision=$p" "${RUN[@]}" 2> "$OUT/${model}_n1_$p.log"
    echo "== $model N=2 shardline $p" >&2
    build/bin/shardline launch --config "deploy/configs/fmnist_$model.textproto" --workers 2 \
      --workdir "$OUT/${model}_n2_$p" --set "train.precision=$p" "${RUN[@]}" 2> "$OUT/${model}_n2_$p.log"
  done
done
for model in $MODELS; do
  for p in FP32 BF16; do
    flag=(); [ $p = BF16 ] && flag=(--autocast)
    echo "== $model N=1 torch $p" >&2
    $PIN /usr/bin/python3 "bench/peers/torch_$model.py" --epochs "$EPOCHS" --eval_every 1000000 "${flag[@]}" \
      > "$OUT/${model}_n1_torch_$p.jsonl"
    echo "== $model N=2 DDP $p" >&2
    ddp_local "bench/peers/torch_$model.py" 2 --epochs "$EPOCHS" --eval_every 1000000 "${flag[@]}" \
      > "$OUT/${model}_n2_torch_$p.jsonl"
  done
done
/usr/bin/python3 - "$OUT" "$MODELS" <<'PY' | tee "$OUT/summary.md"
import json, os, sys
out = sys.argv[1]
BATCH = 128
def jsonl(path):
    return [json.loads(l) for l in open(path) if l.strip().startswith("{")]
print("| model | N | run | samples/s | test accuracy | BF16 / FP32 | shardline / PyTorch |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for model in sys.argv[2].split():
    for n in (1, 2):
        rate, acc = {}, {}
        for p in ("FP32", "BF16"):
            ev = [l for l in jsonl(f"{out}/{model}_n{n}_{p}/metrics.jsonl") if l.get("split") == "eval"][-1]
            rate[("shardline", p)] = ev["step"] * BATCH / ev["train_seconds"]
            acc[("shardline", p)] = ev["accuracy"]
            path = f"{out}/{model}_n{n}_torch_{p}.jsonl"
            if os.path.exists(path):
                rows = jsonl(path)
                rate[("torch", p)] = [r for r in rows if r.get("summary")][0]["samples_per_second"]
                acc[("torch", p)] = [r for r in rows if r.get("split") == "eval"][-1]["accuracy"]
        for side in ("shardline", "torch"):
            for p in ("FP32", "BF16"):
                if (side, p) not in rate:
                    continue
                r = rate[(side, p)]
                label = f"shardline {p}" if side == "shardline" else (
                    ("PyTorch" if n == 1 else "DDP gloo") + (" autocast bf16" if p == "BF16" else " float32"))
                ratio_p = f"{r / rate[(side, 'FP32')]:.2f}x" if p == "BF16" else ""
                ratio_s = f"{r / rate[('torch', p)]:.2f}x" if side == "shardline" and ("torch", p) in rate else ""
                print(f"| {model} | {n} | {label} | {r:,.0f} | {acc[(side, p)]:.4f} | {ratio_p} | {ratio_s} |")
PY
