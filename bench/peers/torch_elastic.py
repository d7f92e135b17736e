#!/usr/bin/python3
"""torchrun peer for bench/drivers/recovery_bench.sh: DDP (gloo) W1 training that
prints the wall-clock time of its first completed step after every
(re)start, so the harness can time a restart from SIGKILL to training
again. torchrun restarts every worker from scratch (step 0)."""
import os, time

import torch
import torch.distributed as dist

from torch_mlp import build_mlp, load


def main():
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    xtr, ytr = load("/usr/share/datasets/fashion-mnist", "train")
    model = torch.nn.parallel.DistributedDataParallel(build_mlp("256,128"))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    local = 128 // world
    for s in range(60000):
        idx = torch.randint(0, xtr.shape[0], (local,))
        opt.zero_grad(set_to_none=True)
        loss_fn(model(xtr[idx]), ytr[idx]).backward()
        opt.step()
        if s == 0:
            print(f"FIRSTSTEP {time.time():.6f} rank {rank} restart {os.environ.get('TORCHELASTIC_RESTART_COUNT')}",
                  flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
