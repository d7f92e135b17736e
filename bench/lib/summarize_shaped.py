#!/usr/bin/python3
"""Summarises bench/drivers/shaped_links_bench.sh's outputs as markdown."""
import json, sys

from worker_log import PHASES, phases, steady_samples_per_second

out, rates, worlds = sys.argv[1], sys.argv[2].split(), [int(n) for n in sys.argv[3].split()]
modes = sys.argv[4].split() if len(sys.argv) > 4 else ["overlap", "sequential"]


def jsonl(path):
    try:
        return [json.loads(l) for l in open(path) if l.strip().startswith("{")]
    except OSError:
        return []


def shardline(rate, n, mode):
    d = f"{out}/shardline_{mode}_{rate}_n{n}"
    rate_s = steady_samples_per_second(jsonl(f"{d}/metrics.jsonl"))
    try:
        p = phases(open(f"{d}/worker-0.log").read())
    except OSError:
        p = None
    if not p:
        return rate_s, "-"
    text = " / ".join(f"{p[k]:.1f}" for k in PHASES)  # as the log wrote them (%.1f)
    if "background" in p:
        text += f"; collectives {p['background']:.1f}, {p['hidden']:.1f} hidden"
    return rate_s, text


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
            s, phase_text = shardline(rate, n, mode)
            ratio = f"{s / d:.2f}x" if s and d else "-"
            f = lambda v: f"{v:,.0f}" if v else "failed"
            print(f"| {rate} | {bw:.2f} Gbit/s |" if bw else f"| {rate} | - |",
                  f"{n} | {mode} | {f(s)} | {f(d)} | {ratio} | {phase_text} |")
