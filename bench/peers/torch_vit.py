#!/usr/bin/python3
"""PyTorch peer for bench/drivers/precision_images_bench.sh: the ViT of
deploy/configs/fmnist_vit.textproto (patch 4 on 28x28: 49 patch tokens and a
class token, 4 pre-LayerNorm blocks of d 64, 4 heads, MLP 2d with GELU
(tanh), final LayerNorm, the class token's row to a linear head), with the
same data, global batch, GPT-2 initialisation, AdamW (decay on matrices and
embeddings), gradient clipping at 1.0, and warmup + cosine schedule, on one
thread per process. Attention is written out (q k^T / sqrt(hd), softmax,
times v): PyTorch 1.13 has no fused attention for training on CPU.

  python3 bench/peers/torch_vit.py [--autocast]                 # one process
  torchrun --nproc_per_node=2 bench/peers/torch_vit.py          # DDP (gloo), 2 ranks

The loop, data, schedule and output are image_loop.py's, as torch_cnn.py's.
"""
import argparse, math

import torch
import torch.nn.functional as F

import image_loop


class Block(torch.nn.Module):
    def __init__(self, d, heads, hidden):
        super().__init__()
        self.heads = heads
        self.ln_1, self.ln_2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.c_attn, self.attn_proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.c_fc, self.mlp_proj = torch.nn.Linear(d, hidden), torch.nn.Linear(hidden, d)

    def forward(self, x):
        n, t, d = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(d, dim=2)
        q, k, v = (z.view(n, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = torch.softmax((q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d // self.heads)), dim=-1)
        x = x + self.attn_proj((att @ v).transpose(1, 2).reshape(n, t, d))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class Vit(torch.nn.Module):
    def __init__(self, patch=4, layers=4, d=64, heads=4, mlp_ratio=2, classes=10, size=28):
        super().__init__()
        self.embed = torch.nn.Conv2d(1, d, patch, stride=patch)
        self.cls = torch.nn.Parameter(torch.zeros(1, 1, d))
        self.pos = torch.nn.Parameter(torch.zeros(1, (size // patch) ** 2 + 1, d))
        self.blocks = torch.nn.ModuleList(Block(d, heads, mlp_ratio * d) for _ in range(layers))
        self.norm, self.head = torch.nn.LayerNorm(d), torch.nn.Linear(d, classes)
        with torch.no_grad():  # GPT-2's initialisation, as shardline's ViT
            for name, q in self.named_parameters():
                if q.dim() >= 2:
                    std = 0.02 / math.sqrt(2 * layers) if name.endswith("proj.weight") else 0.02
                    q.normal_(0.0, std)
                elif name.endswith("bias"):
                    q.zero_()

    def forward(self, x):
        x = self.embed(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        for b in self.blocks:
            x = b(x)
        return self.head(self.norm(x)[:, 0])


def main():
    p = argparse.ArgumentParser()
    image_loop.add_args(p, epochs=15, lr=0.002, warmup=300)
    p.add_argument("--weight_decay", type=float, default=0.05)
    a = p.parse_args()

    def adamw(net):  # decay on matrices and embeddings only
        decayed = [q for q in net.parameters() if q.dim() >= 2]
        rest = [q for q in net.parameters() if q.dim() < 2]
        return torch.optim.AdamW([{"params": decayed, "weight_decay": a.weight_decay},
                                  {"params": rest, "weight_decay": 0.0}], lr=a.lr, betas=(0.9, 0.999))

    image_loop.run(a, Vit, adamw, lambda net, lr: torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0))


if __name__ == "__main__":
    main()
