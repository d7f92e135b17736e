#!/usr/bin/python3
"""PyTorch peer for bench/drivers/train_vs_torch.sh: the same MLP, data, batch,
optimizer and schedule as a shardline config, on one thread.

Prints one JSON object per eval and a final summary line, in the same terms
shardline reports (train_seconds excludes evaluation).
"""
import argparse, gzip, json, math, os, time

import numpy as np
import torch

MEAN, STD = 0.2860, 0.3530


def load(dirname, split):
    with gzip.open(os.path.join(dirname, f"{split}-images-idx3-ubyte.gz")) as f:
        x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 784)
    with gzip.open(os.path.join(dirname, f"{split}-labels-idx1-ubyte.gz")) as f:
        y = np.frombuffer(f.read(), np.uint8, offset=8)
    x = (x.astype(np.float32) / 255.0 - MEAN) / STD
    return torch.from_numpy(x), torch.from_numpy(y.astype(np.int64))


def build_mlp(hidden):
    """784 -> hidden... -> 10 with ReLUs, as shardline's MLP."""
    widths = [784] + [int(h) for h in hidden.split(",")] + [10]
    layers = []
    for i in range(len(widths) - 1):
        layers.append(torch.nn.Linear(widths[i], widths[i + 1]))
        if i + 2 < len(widths):
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


def schedule(base, warmup, total):
    """shardline's schedule: linear warmup, then cosine to 0."""
    def lr_at(s):
        if s < warmup:
            return base * (s + 1) / warmup
        prog = min(1.0, (s - warmup) / max(1, total - 1 - warmup))
        return base * 0.5 * (1 + math.cos(math.pi * prog))
    return lr_at


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--hidden", default="256,128")
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--epochs", type=int, default=15)
    p.add_argument("--steps", type=int, default=0, help="overrides --epochs")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--eval_every", type=int, default=468)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()

    torch.set_num_threads(1)
    torch.manual_seed(a.seed)
    xtr, ytr = load(a.data, "train")
    xte, yte = load(a.data, "t10k")
    model = build_mlp(a.hidden)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)
    spe = xtr.shape[0] // a.batch
    total = a.steps if a.steps else a.epochs * spe

    lr_at = schedule(a.lr, a.warmup, total)

    loss_fn = torch.nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(a.seed)
    train_seconds, perm, step_times = 0.0, None, []
    for s in range(total):
        if s % spe == 0:
            perm = torch.randperm(xtr.shape[0], generator=gen)
        t0 = time.perf_counter()
        idx = perm[(s % spe) * a.batch:(s % spe + 1) * a.batch]
        xb, yb = xtr[idx], ytr[idx]
        for g in opt.param_groups:
            g["lr"] = lr_at(s)
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
        dt = time.perf_counter() - t0
        train_seconds += dt
        step_times.append(dt)
        if (s + 1) % a.eval_every == 0 or s + 1 == total:
            with torch.no_grad():
                correct, lsum = 0, 0.0
                for b in range(0, xte.shape[0], 1000):
                    out = model(xte[b:b + 1000])
                    lsum += torch.nn.functional.cross_entropy(out, yte[b:b + 1000], reduction="sum").item()
                    correct += (out.argmax(1) == yte[b:b + 1000]).sum().item()
            print(json.dumps({"step": s + 1, "split": "eval", "loss": lsum / xte.shape[0],
                              "accuracy": correct / xte.shape[0], "train_seconds": train_seconds}),
                  flush=True)
    steady = sorted(step_times[len(step_times) // 10:])
    median = steady[len(steady) // 2]
    print(json.dumps({"summary": True, "steps": total, "train_seconds": train_seconds,
                      "samples_per_second": total * a.batch / train_seconds,
                      "steady_samples_per_second": a.batch / median,
                      "torch": torch.__version__}), flush=True)


if __name__ == "__main__":
    main()
