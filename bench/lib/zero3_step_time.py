#!/usr/bin/python3
"""One line of bench/drivers/zero3_memory_bench.sh's step_time.dat from a
run's workdir: the run's step time (the global batch over the median of its
logged training rates after the first window, which holds start-up) and the
slowest worker's per-step breakdown from its final log line.

usage: zero3_step_time.py <workdir> <workers> <key...>"""
import json
import re
import statistics
import sys

d, n, key = sys.argv[1], int(sys.argv[2]), " ".join(sys.argv[3:])
batch = int(re.search(r"global_batch_size: (\d+)", open(f"{d}/config.textproto").read()).group(1))
rates = [json.loads(l)["samples_per_second"] for l in open(f"{d}/metrics.jsonl") if '"split":"train"' in l]
if len(rates) < 2:
    sys.exit(f"{d}/metrics.jsonl: {len(rates)} training windows; need at least 2")
step_ms = 1000 * batch / statistics.median(rates[1:])
parts = []
for r in range(n):
    line = [l for l in open(f"{d}/logs/worker-{r}.log").read().splitlines() if "finished" in l and "per step" in l][-1]
    # Without overlap there are no background collectives in the line.
    found = [re.search(p, line) for p in (r"compute ([\d.]+) ms", r"reduce-scatter ([\d.]+) ms",
                                          r"all-gather ([\d.]+) ms", r"collectives ([\d.]+) ms",
                                          r"\(([\d.]+) ms hidden\)")]
    parts.append([float(m.group(1)) if m else 0.0 for m in found])
slowest = max(parts, key=lambda p: p[0] + p[1] + p[2])
print(key, f"{step_ms:.1f}", " ".join(f"{x:.1f}" for x in slowest))
