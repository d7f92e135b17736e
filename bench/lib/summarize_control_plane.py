#!/usr/bin/env python3
"""The table of bench/drivers/control_plane_bench.sh (issue 18)."""
import json
import re
import sys


def coordinator_verdicts(path, deadline_ms):
    """Past the deadline (ms) in the coordinator's own "no heartbeat for Xs"
    lines: from when it read the silent worker's last report to when it
    declared it lost, none of the load generator's own delays in it."""
    try:
        text = open(path).read()
    except FileNotFoundError:
        return []
    return sorted(float(x) * 1e3 - deadline_ms for x in re.findall(r"no heartbeat for ([0-9.]+)s", text))

out, worlds = sys.argv[1], [int(w) for w in sys.argv[2].split()]
print("| workers | world formed | reports/s | coordinator CPU (cores) | threads | RSS MiB | silent worker: past the deadline p50 / p99 / max | the same, the coordinator's own count (max) | dead worker detected | eval now to all (p50) | stop to all | checkpoint now: every worker told / committed (p50) | load generator's own write delay p50 / p99 |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for n in worlds:
    try:
        rows = {r["phase"]: r for r in (json.loads(l) for l in open(f"{out}/n{n}/load.jsonl") if l.strip())}
    except FileNotFoundError:
        rows = {}
    f, s, si, d, c, k = (rows.get(p, {}) for p in ("formation", "steady", "silence", "death", "commands", "checkpoint"))
    cell = lambda r, k, fmt: fmt.format(r[k]) if k in r else "-"
    silence = (f"{si['over_deadline_ms_p50']:.0f} / {si['over_deadline_ms_p99']:.0f} / {si['over_deadline_ms_max']:.0f} ms"
               if si else "-")
    verdicts = coordinator_verdicts(f"{out}/n{n}/coordinator.log", si["deadline_ms"]) if si else []
    own = f"{max(verdicts):.0f} ms" if verdicts else "-"
    print(f"| {n:,} | {cell(f, 'seconds', '{:.2f} s')} | {cell(s, 'reports_per_second', '{:,.0f}')} | {cell(s, 'coordinator_cpu_cores', '{:.2f}')} | "
          f"{cell(s, 'threads', '{}')} | {s['rss_bytes'] / 2**20:.0f} | {silence} | {own} | {cell(d, 'detected_ms', '{:.0f} ms')} | "
          f"{cell(c, 'eval_to_all_ms_p50', '{:.0f} ms')} | {cell(c, 'stop_to_all_ms', '{:.0f} ms')} | "
          f"{cell(k, 'told_all_ms_p50', '{:.0f}')} / {cell(k, 'committed_ms_p50', '{:.0f} ms')} | "
          f"{cell(s, 'report_write_ms_p50', '{:.0f}')} / {cell(s, 'report_write_ms_p99', '{:.0f} ms')} |"
          if s else f"| {n:,} | {cell(f, 'seconds', '{:.2f} s')} | - | - | - | - | {silence} | {own} | - | - | - | - | - |")
