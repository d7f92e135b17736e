#!/usr/bin/python3
"""Summarises bench/drivers/zero3_memory_bench.sh's outputs as markdown:
peak RSS per worker against the model's prediction (memory.dat, part 1) and
step time of stage 3 over stage 2 (step_time.dat, part 3). Either may be
absent."""
import os
import statistics
import sys

NAMES = {"small": "austen_gpt (0.84M)", "big": "50.6M"}


def memory(out):
    rows = [l.split() for l in open(f"{out}/memory.dat").read().splitlines()[1:]]
    base = open(f"{out}/baseline.txt").read().split()[1]
    print(f"Peak RSS per worker, MiB (the largest of the workers), and the model's prediction: state (stage 2: "
          f"8P + 8P/N bytes, stage 3: 16P/N) + 2 x the parameters gathered at once beyond the own pieces "
          f"(parameters and their gradients) or, if more, what the run's end adds (its evaluation's workspace and, at "
          f"stage 3, the parameters the evaluation gathers, 4P (1 - 1/N)) + the training activations + the process baseline ({base} MiB, a 1-layer d=32 GPT).")
    print()
    print("| GPT | N | stage | remat | peak RSS | predicted | state | gathered | activations | evaluation | "
          "measured / predicted |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for size, n, stage, remat, rss, pred, state, gathered, act, _secs, ev in rows:
        print(f"| {NAMES[size]} | {n} | {stage} | {remat} | {float(rss):.0f} | {float(pred):.0f} | "
              f"{float(state):.0f} | {float(gathered):.1f} | {float(act):.0f} | {float(ev):.0f} | "
              f"{float(rss) / float(pred):.2f} |")
    print()


def step_time(out):
    rows = [l.split() for l in open(f"{out}/step_time.dat").read().splitlines()[1:]]
    runs = {}
    for size, n, remat, stage, _rep, step_ms, comp, rs, ag, bg, hidden in rows:
        runs.setdefault((size, n, remat, stage), []).append([float(x) for x in (step_ms, comp, rs, ag, bg, hidden)])
    if not runs:
        return
    reps = max(len(v) for v in runs.values())
    print(f"Step time, stage 3 over stage 2 (ms per step: the global batch over the median logged training rate "
          f"after the first window; the median of {reps} alternating run(s) each; loopback). Beside it the slowest "
          f"worker's per-step means at stage 3: compute, the reduce-scatter and all-gather waits on the training "
          f"thread, and the collectives run in the background (how much of them was hidden).")
    print()
    print("| GPT | N | remat | stage 2 ms | stage 3 ms | stage 3 / stage 2 | stage 3: compute / reduce-scatter / "
          "all-gather ms | background (hidden) ms |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for size in ("small", "big"):
        for n in ("2", "4"):
            for remat in ("false", "true"):
                a, b = runs.get((size, n, remat, "2")), runs.get((size, n, remat, "3"))
                if not a or not b:
                    continue
                s2 = statistics.median(r[0] for r in a)
                s3 = statistics.median(r[0] for r in b)
                last = b[-1]
                print(f"| {NAMES[size]} | {n} | {remat} | {s2:.0f} | {s3:.0f} | {s3 / s2:.2f}x | "
                      f"{last[1]:.0f} / {last[2]:.0f} / {last[3]:.0f} | {last[4]:.0f} ({last[5]:.0f}) |")
    print()


out = sys.argv[1]
if os.path.exists(f"{out}/memory.dat"):
    memory(out)
if os.path.exists(f"{out}/step_time.dat"):
    step_time(out)
