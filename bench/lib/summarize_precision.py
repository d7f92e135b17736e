#!/usr/bin/python3
"""Summarises bench/drivers/precision_bench.sh as markdown: tokens/s of
shardline FP32 / BF16 and PyTorch float32 / autocast, MFU against the peak
of each precision, final validation loss, peak RSS per worker."""
import json, os, re, sys

out, models = sys.argv[1], sys.argv[2].split()
BATCH = {"small": 32, "wide": 8}
CONTEXT = 128


def jsonl(path):
    return [json.loads(l) for l in open(path) if l.strip().startswith("{")]


peaks = {}
for b in json.load(open(f"{out}/peaks.json"))["benchmarks"]:
    if b.get("run_type") == "iteration":
        key = ("FP32" if b["name"].startswith("BM_Sgemm") else
               "DNNL_FP32" if b["name"].startswith("BM_DnnlFloatGemm") else "BF16")
        peaks[key] = max(peaks.get(key, 0), b["GFLOPs"] / 1e9)

check = jsonl(f"{out}/check.json")[0]
print(f"Correctness (shardline BF16 against PyTorch autocast, same weights and batches): first-batch logits within "
      f"{check['logits_max_rel_error']:.2e} of the largest, {check['steps']} training losses within "
      f"{check['loss_max_rel_error']:.2e} relative (goals 1e-2, 1e-2): {'ok' if check['ok'] else 'FAILED'}.")
print()
print(f"Peaks on one thread: sgemm {peaks['FP32']:.1f} GFLOP/s, oneDNN bfloat16 {peaks['BF16']:.1f} GFLOP/s "
      f"({peaks['BF16'] / peaks['FP32']:.2f}x); oneDNN float32 {peaks.get('DNNL_FP32', 0):.1f} GFLOP/s "
      f"(not used: FP32 stays on OpenBLAS).")
print()
print("| model | N | run | tokens/s | MFU | final val loss | peak RSS / worker | BF16 / FP32 | shardline / PyTorch |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for model in models:
    for n in (1, 2):
        rate, loss = {}, {}
        rss, flops = {}, 0
        for p in ("FP32", "BF16"):
            name = f"{out}/{model}_n{n}_shardline_{p}"
            ev = [l for l in jsonl(f"{name}/metrics.jsonl") if l.get("split") == "eval"]
            rate[("shardline", p)] = ev[-1]["step"] * BATCH[model] * CONTEXT / ev[-1]["train_seconds"]
            loss[("shardline", p)] = ev[-1]["loss"]
            log = open(f"{name}.log").read() + "".join(
                open(f"{name}/logs/{f}").read() for f in os.listdir(f"{name}/logs")) if os.path.isdir(
                f"{name}/logs") else open(f"{name}.log").read()
            flops = int(re.search(r"(\d+) training FLOPs per example", log).group(1))
            r = [float(x) for x in re.findall(r"peak ([0-9.]+) MiB \(RSS\)", log)]
            rss[p] = max(r) if r else None
            rows = jsonl(f"{out}/{model}_n{n}_torch_{p}.jsonl")
            rate[("torch", p)] = [r for r in rows if r.get("summary")][0]["tokens_per_second"]
            loss[("torch", p)] = [r for r in rows if r.get("split") == "eval"][-1]["loss"]
        for side in ("shardline", "torch"):
            for p in ("FP32", "BF16"):
                r = rate[(side, p)]
                mfu = r / CONTEXT * flops / 1e9 / (n * peaks[p]) * 100
                label = {"shardline": f"shardline {p}", "torch": ("PyTorch" if n == 1 else "DDP gloo") +
                         (" autocast bf16" if p == "BF16" else " float32")}[side]
                ratio_p = f"{r / rate[(side, 'FP32')]:.2f}x" if p == "BF16" else ""
                ratio_s = f"{r / rate[('torch', p)]:.2f}x" if side == "shardline" else ""
                mem = f"{rss[p]:.0f} MiB" if side == "shardline" and rss[p] else ""
                print(f"| {model} | {n} | {label} | {r:,.0f} | {mfu:.1f}% | {loss[(side, p)]:.4f} | {mem} | {ratio_p} "
                      f"| {ratio_s} |")
