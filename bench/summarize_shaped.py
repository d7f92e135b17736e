#!/usr/bin/python3
"""Summarises bench/shaped_links_bench.sh's outputs as markdown."""
import json, re, statistics, sys

out, rates, worlds = sys.argv[1], sys.argv[2].split(), [int(n) for n in sys.argv[3].split()]
modes = sys.argv[4].split() if len(sys.argv) > 4 else ["overlap", "sequential"]


def jsonl(path):
    try:
        return [json.loads(l) for l in open(path) if l.strip().startswith("{")]
    except OSError:
        return []


def shardline(rate, n, mode):
    d = f"{out}/shardline_{mode}_{rate}_n{n}"
    train = [l for l in jsonl(f"{d}/metrics.jsonl") if l.get("split") == "train"]
    rate_s = statistics.median(l["samples_per_second"] for l in train[1:]) if len(train) > 1 else None
    m = None
    try:
        m = re.search(r"per step: compute ([\d.]+) ms, reduce-scatter ([\d.]+) ms, optimizer ([\d.]+) ms, "
                      r"all-gather ([\d.]+) ms(, collectives ([\d.]+) ms in the background \(([\d.]+) ms hidden\))?",
                      open(f"{d}/worker-0.log").read())
    except OSError:
        pass
    if not m:
        return rate_s, "-"
    phases = " / ".join(m.groups()[:4])
    if m.group(6):
        phases += f"; collectives {m.group(6)}, {m.group(7)} hidden"
    return rate_s, phases


def ddp(rate, n):
    s = [l for l in jsonl(f"{out}/ddp_{rate}_n{n}_rank0.jsonl") if l.get("summary")]
    return s[0]["steady_samples_per_second"] if s else None


def iperf(rate):
    try:
        j = json.load(open(f"{out}/iperf_{rate}.json"))
        return j["end"]["sum_received"]["bits_per_second"] / 1e9
    except (OSError, KeyError, ValueError):
        return None


print("| link (tbf) | iperf3 | N | shardline mode | shardline samples/s | DDP samples/s | ratio | shardline ms/step: compute / reduce-scatter wait / optimizer / all-gather wait |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
for rate in rates:
    bw = iperf(rate)
    for n in worlds:
        d = ddp(rate, n)
        for mode in modes:
            s, phases = shardline(rate, n, mode)
            ratio = f"{s / d:.2f}x" if s and d else "-"
            f = lambda v: f"{v:,.0f}" if v else "failed"
            print(f"| {rate} | {bw:.2f} Gbit/s |" if bw else f"| {rate} | - |",
                  f"{n} | {mode} | {f(s)} | {f(d)} | {ratio} | {phases} |")
