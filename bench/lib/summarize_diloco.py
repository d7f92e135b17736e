#!/usr/bin/python3
"""Summarises bench/drivers/diloco_bench.sh as markdown: per rate and run,
training seconds to the target bits per byte, the final bits per byte and
the bytes across the link per 1,000 steps; and the .dat files the plot reads."""
import json, os, sys

out, rates, steps, target = sys.argv[1], sys.argv[2].split(), int(sys.argv[4]), float(sys.argv[5])
hs = [h.replace(":", "_") for h in sys.argv[3].split()]  # run names: h<H>[_<LR>_<MOMENTUM>[_<WIRE>]]


def evals(d):
    try:
        lines = [json.loads(l) for l in open(f"{d}/metrics.jsonl") if l.strip().startswith("{")]
    except OSError:
        return []
    return [l for l in lines if l.get("split") == "eval" and "bits_per_byte" in l]


def iperf(rate):
    try:
        j = json.load(open(f"{out}/{rate}/iperf.json"))
        return j["end"]["sum_received"]["bits_per_second"] / 1e6
    except (OSError, KeyError, ValueError):
        return float("nan")


print(f"STEPS={steps}, target {target} bits per byte; seconds are training seconds (evaluation excluded)\n")
print("| link (iperf3) | run | s to target | x sync | final bpb | steps | MB across / 1,000 steps | x sync |")
print("|---|---|---|---|---|---|---|---|")
for rate in rates:
    rows = {}
    for name in ["sync"] + [f"h{h}" for h in hs]:
        d = f"{out}/{rate}/{name}"
        e = evals(d)
        if not e:
            continue
        reach = next((x["train_seconds"] for x in e if x["bits_per_byte"] <= target), None)
        try:
            link = int(open(f"{d}/link_bytes").read())
        except (OSError, ValueError):
            link = 0
        last = e[-1]
        rows[name] = (reach, last["bits_per_byte"], last["step"], link / max(last["step"], 1) * 1000 / 1e6)
        with open(f"{d}/curve.dat", "w") as f:
            for x in e:
                f.write(f"{x['train_seconds']} {x['bits_per_byte']} {x['step']}\n")
    sync = rows.get("sync")
    for name, (reach, bpb, last_step, mb) in rows.items():
        ratio = f"{reach / sync[0]:.3f}" if reach and sync and sync[0] else "-"
        mb_ratio = f"{mb / sync[3]:.4f}" if sync and sync[3] else "-"
        print(f"| {rate} ({iperf(rate):.0f} Mbit/s) | {name} | {f'{reach:.0f}' if reach else 'not reached'} | {ratio} "
              f"| {bpb:.4f} | {last_step} | {mb:.1f} | {mb_ratio} |")
