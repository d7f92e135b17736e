#!/usr/bin/env bash
# shardline's GPT against PyTorch (python3-torch), part 1: correctness.
# From the same initial weights and the same batches, PyTorch's GPT with
# nanoGPT's names (bench/peers/torch_gpt.py) must give shardline's logits
# (within 1e-4 of the largest) and shardline's first 20 training losses
# (within 1e-3 relative). One command:
#   bench/drivers/gpt_vs_torch.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
./deploy/install-deps.sh --test
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends python3-torch python3-numpy > /dev/null
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release > /dev/null && cmake --build build -j2 --target shardline_cli gpt_reference > /dev/null
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
cd bench/peers
OMP_NUM_THREADS=1 /usr/bin/python3 torch_gpt.py check --ref "$out/ref" --metrics "$out/run/metrics.jsonl"
