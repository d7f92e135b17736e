#!/usr/bin/python3
"""Summarises bench/drivers/zero3_memory_bench.sh's memory.dat as markdown:
peak RSS per worker against the model's prediction, and step time of stage
3 over stage 2."""
import sys

out = sys.argv[1]
rows = [l.split() for l in open(f"{out}/memory.dat").read().splitlines()[1:]]
base = open(f"{out}/baseline.txt").read().split()[1]
print(f"Peak RSS per worker, MiB (the largest of the workers), and the model's prediction: state (stage 2: 8P + 8P/N "
      f"bytes, stage 3: 16P/N) + 2 x the parameters gathered at once beyond the own pieces (parameters and their "
      f"gradients) or, if more, what the run's end adds (its evaluation's workspace; at stage 3 the parameters the "
      f"evaluation gathers, 4P (1 - 1/N); at stage 2 the result's copy of the parameters, 4P) + the training "
      f"activations + the process baseline ({base} MiB, a 1-layer d=32 GPT).")
print()
print("| GPT | N | stage | remat | peak RSS | predicted | state | gathered | activations | evaluation | "
      "measured / predicted |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for size, n, stage, remat, rss, pred, state, gathered, act, secs, ev in rows:
    name = "austen_gpt (0.84M)" if size == "small" else "50.6M"
    print(f"| {name} | {n} | {stage} | {remat} | {float(rss):.0f} | {float(pred):.0f} | {float(state):.0f} | "
          f"{float(gathered):.1f} | {float(act):.0f} | {float(ev):.0f} | {float(rss) / float(pred):.2f} |")
print()
print("Step time, stage 3 over stage 2 (training seconds of the slowest worker, the same steps; loopback):")
print()
print("| GPT | N | remat | stage 2 s | stage 3 s | stage 3 / stage 2 |")
print("| --- | --- | --- | --- | --- | --- |")
t = {(r[0], r[1], r[2], r[3]): float(r[9]) for r in rows}
for size in ("small", "big"):
    for n in ("2", "4"):
        for remat in ("false", "true"):
            a, b = t.get((size, n, "2", remat)), t.get((size, n, "3", remat))
            if a and b:
                name = "austen_gpt (0.84M)" if size == "small" else "50.6M"
                print(f"| {name} | {n} | {remat} | {a:.2f} | {b:.2f} | {b / a:.2f}x |")
