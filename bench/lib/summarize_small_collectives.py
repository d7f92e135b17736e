#!/usr/bin/env python3
"""Tables for bench/drivers/small_collectives_bench.sh (issue 18)."""
import json
import sys

out = sys.argv[1]


def jsonl(path):
    try:
        return [json.loads(l) for l in open(path) if l.strip()]
    except FileNotFoundError:
        return []


rows = jsonl(f"{out}/in_process.jsonl")
worlds = sorted({r["world"] for r in rows})
print("Scalar all-reduce (4 doubles), N ranks in one process, median µs of the slowest rank:\n")
print("| transport | " + " | ".join(f"N={n}" for n in worlds) + " | N=16 / N=2 |")
print("| --- |" + " --- |" * (len(worlds) + 1))
for t in ("local", "grpc"):
    lat = {r["world"]: r["median_us"] for r in rows if r["transport"] == t and r["op"] == "scalars"}
    ratio = f"{lat[16] / lat[2]:.1f}x" if 16 in lat and 2 in lat else "-"
    print(f"| {t} | " + " | ".join(f"{lat.get(n, 0):,.0f}" for n in worlds) + f" | {ratio} |")

print("\nAllReduce by size: ring / recursive doubling, median µs (the faster in bold):\n")
sizes = sorted({r["bytes"] for r in rows if r["op"] == "allreduce"})
for t in ("local", "grpc"):
    print(f"\n{t} transport:\n")
    print("| bytes | " + " | ".join(f"N={n}" for n in worlds) + " |")
    print("| --- |" + " --- |" * len(worlds))
    for b in sizes:
        cells = []
        for n in worlds:
            get = lambda a: next((r["median_us"] for r in rows if r["transport"] == t and r["op"] == "allreduce"
                                  and r["bytes"] == b and r["world"] == n and r["algorithm"] == a), None)
            ring, dbl = get("ring"), get("doubling")
            if ring is None or dbl is None:
                cells.append("-")
                continue
            cells.append(f"{ring:,.0f} / **{dbl:,.0f}**" if dbl < ring else f"**{ring:,.0f}** / {dbl:,.0f}")
        print(f"| {b:,} | " + " | ".join(cells) + " |")

procs = jsonl(f"{out}/processes.jsonl")
if procs:
    print("\nScalar all-reduce (4 doubles), N processes over loopback gRPC, median µs of the slowest rank:\n")
    builds = [b for b in ("baseline", "this") if any(p["build"] == b for p in procs)]
    pw = sorted({p["world"] for p in procs})
    print("| build | " + " | ".join(f"N={n}" for n in pw) + " | N=16 / N=2 |")
    print("| --- |" + " --- |" * (len(pw) + 1))
    for b in builds:
        lat = {p["world"]: p["median_s"] * 1e6 for p in procs if p["build"] == b}
        ratio = f"{lat[16] / lat[2]:.1f}x" if 16 in lat and 2 in lat else "-"
        print(f"| {b} | " + " | ".join(f"{lat.get(n, 0):,.0f}" for n in pw) + f" | {ratio} |")
