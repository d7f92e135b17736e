#!/usr/bin/python3
"""Summarises bench/shaped_links_bench.sh's outputs as markdown."""
import json, re, statistics, sys

out, rates, worlds = sys.argv[1], sys.argv[2].split(), [int(n) for n in sys.argv[3].split()]


def jsonl(path):
    try:
        return [json.loads(l) for l in open(path) if l.strip().startswith("{")]
    except OSError:
        return []


def shardline(rate, n):
    d = f"{out}/shardline_{rate}_n{n}"
    train = [l for l in jsonl(f"{d}/metrics.jsonl") if l.get("split") == "train"]
    rate_s = statistics.median(l["samples_per_second"] for l in train[1:]) if len(train) > 1 else None
    m = None
    try:
        m = re.search(r"per step: compute ([\d.]+) ms, reduce-scatter ([\d.]+) ms, optimizer ([\d.]+) ms, "
                      r"all-gather ([\d.]+) ms", open(f"{d}/worker-0.log").read())
    except OSError:
        pass
    return rate_s, (" / ".join(m.groups()) if m else "-")


def ddp(rate, n):
    s = [l for l in jsonl(f"{out}/ddp_{rate}_n{n}_rank0.jsonl") if l.get("summary")]
    return s[0]["steady_samples_per_second"] if s else None


def iperf(rate):
    try:
        j = json.load(open(f"{out}/iperf_{rate}.json"))
        return j["end"]["sum_received"]["bits_per_second"] / 1e9
    except (OSError, KeyError, ValueError):
        return None


print("| link (tbf) | iperf3 | N | shardline samples/s | DDP samples/s | ratio | shardline ms/step: compute / reduce-scatter / optimizer / all-gather |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for rate in rates:
    bw = iperf(rate)
    for n in worlds:
        s, phases = shardline(rate, n)
        d = ddp(rate, n)
        ratio = f"{s / d:.2f}x" if s and d else "-"
        f = lambda v: f"{v:,.0f}" if v else "failed"
        print(f"| {rate} | {bw:.2f} Gbit/s |" if bw else f"| {rate} | - |", f"{n} | {f(s)} | {f(d)} | {ratio} | {phases} |")
