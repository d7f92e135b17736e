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
import argparse, json, math

import torch

import image_loop
from torch_mlp import load


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
    image_loop.add_args(p, epochs=10, lr=0.05, warmup=200)
    p.add_argument("--conv", default="32,64")
    p.add_argument("--dense", default="128")
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--weight_decay", type=float, default=0.0005)
    p.add_argument("--check_export", default="", help="load this shardline export and print its test accuracy")
    a = p.parse_args()
    conv, dense = [int(c) for c in a.conv.split(",")], [int(d) for d in a.dense.split(",") if d]
    if a.check_export:
        torch.set_num_threads(1)
        return check_export(a.check_export, conv, dense, a.data)

    def decay(net, lr):  # decoupled decay on the weights: p -= lr * wd * p
        with torch.no_grad():
            for q in net.parameters():
                if q.dim() >= 2:
                    q.mul_(1 - lr * a.weight_decay)

    image_loop.run(a, lambda: build_cnn(conv, dense),
                   lambda net: torch.optim.SGD(net.parameters(), lr=a.lr, momentum=a.momentum), decay)


if __name__ == "__main__":
    main()
