"""The training loop the image peers share (torch_cnn.py, torch_vit.py):
Fashion-MNIST as shardline reads it, each rank on its slice of the same
global batch (DDP over gloo under torchrun), the warmup + cosine schedule,
optional torch.autocast("cpu", dtype=torch.bfloat16) around the forward and
loss, and rank 0 printing one JSON object per eval and a summary in
shardline's terms (train_seconds excludes evaluation)."""
import json, os, time

import torch
import torch.distributed as dist

from torch_mlp import load, schedule  # same data and schedule


def add_args(p, epochs, lr, warmup):
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--batch", type=int, default=128, help="global batch")
    p.add_argument("--epochs", type=int, default=epochs)
    p.add_argument("--steps", type=int, default=0, help="overrides --epochs")
    p.add_argument("--lr", type=float, default=lr)
    p.add_argument("--warmup", type=int, default=warmup)
    p.add_argument("--eval_every", type=int, default=468)
    p.add_argument("--autocast", action="store_true",
                   help='torch.autocast("cpu", dtype=torch.bfloat16) around the forward and loss (vs BF16)')


def run(a, build, make_optimizer, before_step):
    """Trains build() as `a` says: make_optimizer(net) gives the optimizer,
    before_step(net, lr) runs between the backward and the optimizer's step."""
    torch.set_num_threads(1)
    distributed = "WORLD_SIZE" in os.environ
    if distributed:
        dist.init_process_group("gloo")
    rank, world = (dist.get_rank(), dist.get_world_size()) if distributed else (0, 1)
    torch.manual_seed(0)
    xtr, ytr = load(a.data, "train")
    xte, yte = load(a.data, "t10k")
    xtr, xte = xtr.reshape(-1, 1, 28, 28), xte.reshape(-1, 1, 28, 28)
    net = build()
    model = torch.nn.parallel.DistributedDataParallel(net) if distributed else net
    opt = make_optimizer(net)
    spe = xtr.shape[0] // a.batch
    total = a.steps if a.steps else a.epochs * spe
    lo, hi = rank * a.batch // world, (rank + 1) * a.batch // world
    lr_at = schedule(a.lr, a.warmup, total)
    loss_fn = torch.nn.CrossEntropyLoss(reduction="sum")
    gen = torch.Generator().manual_seed(0)
    train_seconds, step_times = 0.0, []
    for s in range(total):
        if s % spe == 0:
            perm = torch.randperm(xtr.shape[0], generator=gen)
        t0 = time.perf_counter()
        idx = perm[(s % spe) * a.batch + lo:(s % spe) * a.batch + hi]
        lr = lr_at(s)
        for g in opt.param_groups:
            g["lr"] = lr
        opt.zero_grad(set_to_none=True)
        # Sum over the slice / global batch: DDP averages over ranks, so
        # scale by world to get the global mean as shardline does.
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.autocast):
            loss = loss_fn(model(xtr[idx]).float(), ytr[idx])
        (loss * (world / a.batch)).backward()
        before_step(net, lr)
        opt.step()
        dt = time.perf_counter() - t0
        train_seconds += dt
        step_times.append(dt)
        if rank == 0 and ((s + 1) % a.eval_every == 0 or s + 1 == total):
            with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.autocast):
                correct, lsum = 0, 0.0
                for b in range(0, xte.shape[0], 1000):
                    out = net(xte[b:b + 1000]).float()
                    lsum += torch.nn.functional.cross_entropy(out, yte[b:b + 1000], reduction="sum").item()
                    correct += (out.argmax(1) == yte[b:b + 1000]).sum().item()
            print(json.dumps({"step": s + 1, "split": "eval", "loss": lsum / xte.shape[0],
                              "accuracy": correct / xte.shape[0], "train_seconds": train_seconds}), flush=True)
    if rank == 0:
        steady = sorted(step_times[len(step_times) // 10:])
        print(json.dumps({"summary": True, "world": world, "steps": total, "train_seconds": train_seconds,
                          "samples_per_second": total * a.batch / train_seconds,
                          "steady_samples_per_second": a.batch / steady[len(steady) // 2],
                          "torch": torch.__version__}), flush=True)
    if distributed:
        dist.destroy_process_group()
