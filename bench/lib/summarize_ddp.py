#!/usr/bin/python3
"""Summarises bench/drivers/train_vs_ddp.sh's outputs as markdown."""
import json, sys

from worker_log import owned, phases, steady_samples_per_second

out = sys.argv[1]
TARGET = 0.8833


def jsonl(path):
    return [json.loads(l) for l in open(path) if l.strip().startswith("{")]


def first_reach(evals):
    for e in evals:
        if e["accuracy"] >= TARGET:
            return e["step"] / 468, e["train_seconds"]
    return None, None


def steady(path):
    return steady_samples_per_second(jsonl(path))


def log_phases(log):
    """Mean ms per step of each phase, from a worker's final log line."""
    return phases(open(log).read())


def owned_state(log):
    o = owned(open(log).read())
    return o[1] if o else None


s1 = jsonl(f"{out}/w1_n2/metrics.jsonl")
s1_eval = [l for l in s1 if l["split"] == "eval"]
s1_rate = 7020 * 128 / s1_eval[-1]["train_seconds"]
d1 = jsonl(f"{out}/w1_ddp.jsonl")
d1_eval = [l for l in d1 if l.get("split") == "eval"]
d1_sum = [l for l in d1 if l.get("summary")][0]
se, st = first_reach(s1_eval)
de, dt = first_reach(d1_eval)
w2 = {n: steady(f"{out}/w2_n{n}/metrics.jsonl") for n in (1, 2, 4)}
d2 = [l for l in jsonl(f"{out}/w2_ddp.jsonl") if l.get("summary")][0]["steady_samples_per_second"]

fmt = lambda e, t: "not reached" if e is None else f"epoch {e:.0f}, {t:.2f} s"
print("| workload (2 processes) | metric | shardline | DDP gloo | ratio |")
print("| --- | --- | --- | --- | --- |")
print(f"| W1 784-256-128-10, b128 | samples/s (15 epochs, eval excluded) | {s1_rate:,.0f} | {d1_sum['samples_per_second']:,.0f} | {s1_rate / d1_sum['samples_per_second']:.2f}x |")
print(f"| W1 | first per-epoch eval >= 0.8833 | {fmt(se, st)} | {fmt(de, dt)} | {st / dt:.2f}x time |" if st and dt else "| W1 | time to 0.8833 | - | - | - |")
print(f"| W1 | final test accuracy | {s1_eval[-1]['accuracy']:.4f} | {d1_eval[-1]['accuracy']:.4f} | |")
print(f"| W2 784-2048-2048-10, b256 | steady samples/s | {w2[2]:,.0f} | {d2:,.0f} | {w2[2] / d2:.2f}x |")
print()
print("| W2 scaling | samples/s | vs N x (N=1) |")
print("| --- | --- | --- |")
for n in (1, 2, 4):
    print(f"| N={n} | {w2[n]:,.0f} | {w2[n] / (n * w2[1]):.2f} |")
print()
print("| W2 optimizer state per worker | bytes |")
print("| --- | --- |")
for n in (1, 2, 4):
    print(f"| N={n} | {owned_state(f'{out}/w2_n{n}/logs/worker-0.log')} |")
print()
print("| W2 N=2, rank 0, ms per step | compute | reduce-scatter | optimizer | all-gather |")
print("| --- | --- | --- | --- | --- |")
p = log_phases(f"{out}/w2_n2/logs/worker-0.log")
p1 = log_phases(f"{out}/w2_n1/logs/worker-0.log")
if p and p1:
    print(f"| N=1 | {p1['compute']:.1f} | - | {p1['optimizer']:.1f} | - |")
    print(f"| N=2 | {p['compute']:.1f} | {p['reduce_scatter']:.1f} | {p['optimizer']:.1f} | {p['all_gather']:.1f} |")
    # With communication free, a step would still take compute + optimizer.
    bound = 256 / ((p["compute"] + p["optimizer"]) / 1e3)
    print()
    print(f"W2 N=2 with free communication (256 / (compute + optimizer)): {bound:,.0f} samples/s "
          f"= {bound / d2:.2f}x DDP's {d2:,.0f}")
