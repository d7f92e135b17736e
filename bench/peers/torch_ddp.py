#!/usr/bin/python3
"""PyTorch DDP (gloo) peer for bench/drivers/train_vs_ddp.sh: N processes, the same
MLP, global batch, SGD momentum schedule and data as a shardline config. Each
rank trains on its slice of the same global batch. Rank 0 prints eval lines
and a summary in shardline's terms (train_seconds excludes evaluation)."""
import argparse, json, time

import torch
import torch.distributed as dist

from torch_mlp import build_mlp, load, schedule  # same model, data and schedule


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--hidden", default="256,128")
    p.add_argument("--batch", type=int, default=128, help="global batch")
    p.add_argument("--epochs", type=int, default=15)
    p.add_argument("--steps", type=int, default=0)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--eval_every", type=int, default=468)
    p.add_argument("--fp16_compress", action="store_true",
                   help="DDP's fp16 compression hook (gloo has no bf16 all-reduce)")
    a = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    xtr, ytr = load(a.data, "train")
    xte, yte = load(a.data, "t10k")
    model = torch.nn.parallel.DistributedDataParallel(build_mlp(a.hidden))
    if a.fp16_compress:
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        model.register_comm_hook(dist.group.WORLD, default_hooks.fp16_compress_hook)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)
    spe = xtr.shape[0] // a.batch
    total = a.steps if a.steps else a.epochs * spe
    local = a.batch // world

    lr_at = schedule(a.lr, a.warmup, total)

    loss_fn = torch.nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(0)
    train_seconds, step_times = 0.0, []
    for s in range(total):
        if s % spe == 0:
            perm = torch.randperm(xtr.shape[0], generator=gen)
        t0 = time.perf_counter()
        start = (s % spe) * a.batch + rank * local
        idx = perm[start:start + local]
        for g in opt.param_groups:
            g["lr"] = lr_at(s)
        opt.zero_grad(set_to_none=True)
        loss_fn(model(xtr[idx]), ytr[idx]).backward()
        opt.step()
        dt = time.perf_counter() - t0
        train_seconds += dt
        step_times.append(dt)
        if rank == 0 and ((s + 1) % a.eval_every == 0 or s + 1 == total):
            with torch.no_grad():
                correct = sum((model.module(xte[b:b + 1000]).argmax(1) == yte[b:b + 1000]).sum().item()
                              for b in range(0, xte.shape[0], 1000))
            print(json.dumps({"step": s + 1, "split": "eval", "accuracy": correct / xte.shape[0],
                              "train_seconds": train_seconds}), flush=True)
    if rank == 0:
        steady = sorted(step_times[len(step_times) // 10:])
        print(json.dumps({"summary": True, "world": world, "steps": total, "train_seconds": train_seconds,
                          "samples_per_second": total * a.batch / train_seconds,
                          "steady_samples_per_second": a.batch / steady[len(steady) // 2]}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
