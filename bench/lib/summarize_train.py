#!/usr/bin/python3
"""Summarises bench/drivers/train_vs_torch.sh's outputs as a markdown table."""
import json, statistics, sys

out = sys.argv[1]
TARGET = 0.8833
W1_FLOPS = 4 * 784 * 256 + 6 * (256 * 128 + 128 * 10)
W2_FLOPS = 4 * 784 * 2048 + 6 * (2048 * 2048 + 2048 * 10)


def jsonl(path):
    return [json.loads(l) for l in open(path) if l.strip().startswith("{")]


def first_reach(evals, spe):
    for e in evals:
        if e["accuracy"] >= TARGET:
            return e["step"] / spe, e["train_seconds"]
    return None, None


gflops = statistics.median(b["GFLOPs"] / 1e9 for b in json.load(open(f"{out}/sgemm.json"))["benchmarks"]
                           if b.get("run_type") == "iteration")

s1 = jsonl(f"{out}/w1_shardline/metrics.jsonl")
s1_eval = [l for l in s1 if l["split"] == "eval"]
s1_train = [l for l in s1 if l["split"] == "train"]
t1 = jsonl(f"{out}/w1_torch.jsonl")
t1_eval = [l for l in t1 if l.get("split") == "eval"]
t1_sum = [l for l in t1 if l.get("summary")][0]
s1_rate = 7020 * 128 / s1_eval[-1]["train_seconds"]
s1_ep, s1_t = first_reach(s1_eval, 468)
t1_ep, t1_t = first_reach(t1_eval, 468)

s2 = [l for l in jsonl(f"{out}/w2_shardline/metrics.jsonl") if l["split"] == "train"]
s2_rate = statistics.median(l["samples_per_second"] for l in s2[1:])
t2 = [l for l in jsonl(f"{out}/w2_torch.jsonl") if l.get("summary")][0]
t2_rate = t2["steady_samples_per_second"]

print(f"sgemm 1024^3, 1 thread: {gflops:.1f} GFLOP/s; torch {t1_sum['torch']}")
print()
print("| workload | metric | shardline | PyTorch | ratio |")
print("| --- | --- | --- | --- | --- |")
print(f"| W1 784-256-128-10, b128 | samples/s (15 epochs, eval excluded) | {s1_rate:,.0f} | {t1_sum['samples_per_second']:,.0f} | {s1_rate / t1_sum['samples_per_second']:.2f}x |")
print(f"| W1 | final test accuracy | {s1_eval[-1]['accuracy']:.4f} | {t1_eval[-1]['accuracy']:.4f} | |")
fmt = lambda ep, t: "not reached" if ep is None else f"epoch {ep:.0f}, {t:.2f} s"
ratio = f"{s1_t / t1_t:.2f}x" if s1_t and t1_t else ""
print(f"| W1 | first eval >= 0.8833 (per-epoch evals) | {fmt(s1_ep, s1_t)} | {fmt(t1_ep, t1_t)} | {ratio} time |")
print(f"| W2 784-2048-2048-10, b256 | steady samples/s | {s2_rate:,.0f} | {t2_rate:,.0f} | {s2_rate / t2_rate:.2f}x |")
print(f"| W2 | MFU vs 1-thread sgemm peak | {s2_rate * W2_FLOPS / 1e9 / gflops:.1%} | {t2_rate * W2_FLOPS / 1e9 / gflops:.1%} | |")
