#!/usr/bin/python3
"""PyTorch peer for bench/drivers/cnn_vs_torch.sh: the CNN of
deploy/configs/fmnist_cnn.textproto (conv 3x3 32 + ReLU + 2x2 max pool,
conv 3x3 64 + ReLU + pool, dense 128 + ReLU, dense 10), with the same data,
global batch, He-uniform init (zero biases), SGD with momentum and decoupled
weight decay on weights, and warmup + cosine schedule, on one thread per
process.

  python3 bench/peers/torch_cnn.py                             # one process
  torchrun --nproc_per_node=2 bench/peers/torch_cnn.py         # DDP (gloo), 2 ranks

Each rank trains on its slice of the same global batch. Rank 0 prints one
JSON object per eval and a summary in shardline's terms (train_seconds
excludes evaluation).
"""
import argparse, json, math, os, time

import torch
import torch.distributed as dist

from torch_mlp import load, schedule  # same data and schedule


def build_cnn(conv, dense, classes=10, size=28):
    layers, cin = [], 1
    for c in conv:
        layers += [torch.nn.Conv2d(cin, c, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2)]
        cin, size = c, size // 2
    layers.append(torch.nn.Flatten())
    width = cin * size * size
    for d in dense:
        layers += [torch.nn.Linear(width, d), torch.nn.ReLU()]
        width = d
    layers.append(torch.nn.Linear(width, classes))
    model = torch.nn.Sequential(*layers)
    with torch.no_grad():  # shardline's init: He-uniform over fan-in, zero biases
        for m in model.modules():
            if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear)):
                fan_in = m.weight[0].numel()
                bound = math.sqrt(6.0 / fan_in)
                m.weight.uniform_(-bound, bound)
                m.bias.zero_()
    return model


def load_safetensors(path):
    """{name: tensor} of a safetensors file of F32 tensors (shardline ckpt export)."""
    import numpy as np
    with open(path, "rb") as f:
        data = f.read()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        assert t["dtype"] == "F32", (path, name, t["dtype"])
        b, e = t["data_offsets"]
        out[name] = torch.from_numpy(np.frombuffer(data[8 + n + b:8 + n + e], np.float32).copy()).reshape(t["shape"])
    return out


def state_dict_of(tensors, conv, dense):
    """shardline's tensor names -> build_cnn's nn.Sequential keys."""
    sd, module = {}, 0
    for i in range(len(conv)):
        sd[f"{module}.weight"], sd[f"{module}.bias"] = tensors[f"conv{i}/w"], tensors[f"conv{i}/b"]
        module += 3  # conv, ReLU, pool
    module += 1  # Flatten
    for j in range(len(dense) + 1):
        sd[f"{module}.weight"], sd[f"{module}.bias"] = tensors[f"dense{j}/w"], tensors[f"dense{j}/b"]
        module += 2  # linear, ReLU
    return sd


def check_export(path, conv, dense, data_dir):
    """Loads a shardline export into the PyTorch network; prints its test accuracy."""
    net = build_cnn(conv, dense)
    net.load_state_dict(state_dict_of(load_safetensors(path), conv, dense))
    xte, yte = load(data_dir, "t10k")
    xte = xte.reshape(-1, 1, 28, 28)
    with torch.no_grad():
        correct = sum((net(xte[b:b + 1000]).argmax(1) == yte[b:b + 1000]).sum().item() for b in range(0, 10000, 1000))
    print(json.dumps({"export": path, "torch_accuracy": correct / xte.shape[0]}), flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--conv", default="32,64")
    p.add_argument("--dense", default="128")
    p.add_argument("--batch", type=int, default=128, help="global batch")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--steps", type=int, default=0, help="overrides --epochs")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--weight_decay", type=float, default=0.0005)
    p.add_argument("--eval_every", type=int, default=468)
    p.add_argument("--check_export", default="", help="load this shardline export and print its test accuracy")
    p.add_argument("--autocast", action="store_true",
                   help='torch.autocast("cpu", dtype=torch.bfloat16) around the forward and loss (vs BF16)')
    a = p.parse_args()
    torch.set_num_threads(1)
    if a.check_export:
        return check_export(a.check_export, [int(c) for c in a.conv.split(",")],
                            [int(d) for d in a.dense.split(",") if d], a.data)
    distributed = "WORLD_SIZE" in os.environ
    if distributed:
        dist.init_process_group("gloo")
    rank, world = (dist.get_rank(), dist.get_world_size()) if distributed else (0, 1)
    torch.manual_seed(0)
    xtr, ytr = load(a.data, "train")
    xte, yte = load(a.data, "t10k")
    xtr, xte = xtr.reshape(-1, 1, 28, 28), xte.reshape(-1, 1, 28, 28)
    net = build_cnn([int(c) for c in a.conv.split(",")], [int(d) for d in a.dense.split(",") if d])
    model = torch.nn.parallel.DistributedDataParallel(net) if distributed else net
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)
    decayed = [q for q in net.parameters() if q.dim() >= 2]
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
            loss = loss_fn(model(xtr[idx]), ytr[idx])
        (loss * (world / a.batch)).backward()
        with torch.no_grad():  # decoupled decay: p -= lr * wd * p
            for q in decayed:
                q.mul_(1 - lr * a.weight_decay)
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


if __name__ == "__main__":
    main()
