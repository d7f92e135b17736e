#!/usr/bin/python3
"""Gloo peer for bench/drivers/allreduce_vs_peers.sh: torch.distributed all_reduce
with the gloo backend on loopback, same sizes, timing like
shardline-allreduce-worker (median over iterations of the slowest rank)."""
import argparse, json, os, time

import torch
import torch.distributed as dist


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", default="65536,1048576,16777216,67108864")
    p.add_argument("--iters", type=int, default=20)
    a = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    for nbytes in [int(s) for s in a.sizes.split(",")]:
        buf = torch.ones(nbytes // 4, dtype=torch.float32)
        times = []
        for it in range(a.iters + 3):
            buf.fill_(1.0)
            dist.barrier()
            t0 = time.perf_counter()
            dist.all_reduce(buf)
            dt = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
            dist.all_reduce(dt, op=dist.ReduceOp.MAX)
            if it >= 3:
                times.append(dt.item())
        if rank == 0:
            times.sort()
            med = times[len(times) // 2]
            algbw = nbytes / med / 1e9
            print(json.dumps({"impl": "gloo", "op": "allreduce", "world": world, "bytes": nbytes,
                              "iters": a.iters, "median_s": med, "algbw_GBps": algbw,
                              "busbw_GBps": algbw * 2 * (world - 1) / world}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
