#!/usr/bin/python3
"""Summarises bench/drivers/cnn_vs_torch.sh's outputs as markdown."""
import json, os, re, sys

out = sys.argv[1]


def jsonl(path):
    return [json.loads(l) for l in open(path) if l.strip().startswith("{")]


def evals(path):
    return [l for l in jsonl(path) if l.get("split") == "eval"]


def reach(ev, target):
    for e in ev:
        if e["accuracy"] >= target:
            return e["train_seconds"]
    return None


def shardline(name):
    ev = evals(f"{out}/{name}/metrics.jsonl")
    rate = ev[-1]["step"] * 128 / ev[-1]["train_seconds"]
    return ev, rate


def torch(name):
    rows = jsonl(f"{out}/{name}.jsonl")
    return [r for r in rows if r.get("split") == "eval"], [r for r in rows if r.get("summary")][0]["samples_per_second"]


peak = max(b["GFLOPs"] / 1e9 for b in json.load(open(f"{out}/sgemm.json"))["benchmarks"]
           if b.get("run_type") == "iteration")
flops = int(re.search(r"(\d+) training FLOPs per example", open(f"{out}/n1_shardline.log").read()).group(1))

rows = []
for n, s_name, t_name in ((1, "n1_shardline", "n1_torch"), (2, "n2_shardline", "n2_ddp")):
    s_ev, s_rate = shardline(s_name)
    t_ev, t_rate = torch(t_name)
    rows.append((n, s_ev, s_rate, t_ev, t_rate))

fmt = lambda t: "not reached" if t is None else f"{t:.1f} s"
ratio = lambda a, b: "" if a is None or b is None else f"{b / a:.2f}x faster" if a < b else f"{a / b:.2f}x slower"
print("| N | metric | shardline | PyTorch | ratio |")
print("| --- | --- | --- | --- | --- |")
for n, s_ev, s_rate, t_ev, t_rate in rows:
    peer = "PyTorch" if n == 1 else "DDP gloo"
    print(f"| {n} | samples/s (eval excluded) | {s_rate:,.0f} | {t_rate:,.0f} ({peer}) | {s_rate / t_rate:.2f}x |")
    for target in (0.916, 0.92):
        a, b = reach(s_ev, target), reach(t_ev, target)
        print(f"| {n} | time to {target} (per-epoch evals) | {fmt(a)} | {fmt(b)} | {ratio(a, b)} |")
    print(f"| {n} | final test accuracy | {s_ev[-1]['accuracy']:.4f} | {t_ev[-1]['accuracy']:.4f} | |")
print()
n1_rate = rows[0][2]
print(f"sgemm peak (1 thread, 1024^3): {peak:.1f} GFLOP/s; CNN step {flops / 1e6:.2f} MFLOP per example; "
      f"MFU at N=1: {n1_rate * flops / 1e9 / peak * 100:.1f}% ({n1_rate * flops / 1e9:.1f} GFLOP/s)")
exp = jsonl(f"{out}/export.jsonl")[0]
print(f"PyTorch on shardline's export: test accuracy {exp['torch_accuracy']:.4f} "
      f"(shardline's own final eval: {rows[1][1][-1]['accuracy']:.4f})")
if os.path.exists(f"{out}/perf.txt"):
    shares = {}
    for line in open(f"{out}/perf.txt"):
        m = re.match(r"\s+([\d.]+)%\s+\[[.k]\]\s+(.+?)(\s{2,}|$)", line)
        if not m:
            continue
        pct, sym = float(m.group(1)), m.group(2)
        key = ("sgemm (kernel + packing)" if sym.startswith("sgemm_") else
               "im2col + col2im" if sym in ("shardline::Im2Col", "shardline::Col2Im") else
               "max pooling (fwd + bwd)" if "pool" in sym.lower() else
               "memset/memcpy" if sym.startswith("__mem") else "other")
        shares[key] = shares.get(key, 0) + pct
    print()
    print("| share of the N=1 step (perf, 100 steps) | % |")
    print("| --- | --- |")
    for k, v in sorted(shares.items(), key=lambda kv: -kv[1]):
        print(f"| {k} | {v:.1f} |")
