#!/usr/bin/python3
"""Summarises bench/drivers/allreduce_vs_peers.sh's results as markdown: per
implementation, N and size, the median over the script's rounds."""
import collections, glob, json, statistics, sys

out = sys.argv[1]
rows = [json.loads(l) for l in open(f"{out}/results.jsonl") if l.startswith("{")]
iperfs = [json.load(open(f))["end"]["sum_received"]["bits_per_second"] / 8e9
          for f in sorted(glob.glob(f"{out}/iperf3-*.json"))]
iperf = statistics.median(iperfs)
runs = collections.defaultdict(list)
scalar_runs = collections.defaultdict(list)
for r in rows:
    if r["op"] == "scalars":
        scalar_runs[r["world"]].append(r["median_s"])
    else:
        runs[(r["world"], r["bytes"], r["impl"])].append(r["busbw_GBps"])
by = collections.defaultdict(dict)
for (world, nbytes, impl), v in runs.items():
    by[(world, nbytes)][impl] = statistics.median(v)
scalars = {w: statistics.median(v) for w, v in scalar_runs.items()}

rounds = max(len(v) for v in runs.values()) if runs else 0
print(f"rounds: {rounds} (medians over rounds)")
print(f"iperf3 loopback, one stream: {iperf:.2f} GB/s (rounds: {', '.join(f'{x:.2f}' for x in iperfs)})")
print()
print("| N | size | shardline busbw | Gloo busbw | OpenMPI TCP busbw | bare TCP ring busbw | vs Gloo | vs OpenMPI | vs bare ring |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for (world, nbytes), v in sorted(by.items()):
    s, g, m, t = v.get("shardline"), v.get("gloo"), v.get("openmpi_tcp"), v.get("tcp_ring")
    size = f"{nbytes >> 20} MiB" if nbytes >= 1 << 20 else f"{nbytes >> 10} KiB"
    f = lambda x: f"{x:.2f}" if x else "-"
    ratio = lambda a, b: f"{a / b:.2f}x" if a and b else "-"
    print(f"| {world} | {size} | {f(s)} | {f(g)} | {f(m)} | {f(t)} | {ratio(s, g)} | {ratio(s, m)} | {ratio(s, t)} |")
print()
for world, sec in sorted(scalars.items()):
    print(f"scalar all-reduce (4 doubles), N={world}: median {sec * 1e6:.0f} us")
n2 = [v.get("shardline") for (w, b), v in by.items() if w == 2 and b >= 16 << 20]
ring = [v.get("tcp_ring") / v.get("gloo") for (w, b), v in sorted(by.items())
        if w in (2, 4) and b >= 16 << 20 and v.get("tcp_ring") and v.get("gloo")]
if ring:
    print(f"bare TCP ring / Gloo at 16 and 64 MiB, N=2 and 4: {', '.join(f'{x:.2f}x' for x in ring)}")
if n2:
    print(f"N=2 shardline busbw / iperf3 (16 and 64 MiB): {', '.join(f'{x / iperf:.2f}' for x in n2)}")
