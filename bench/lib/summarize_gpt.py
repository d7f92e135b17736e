#!/usr/bin/python3
"""Summarises bench/drivers/gpt_vs_torch.sh's speed part as markdown: tokens/s,
validation loss, time to the PyTorch run's final validation loss, MFU."""
import json, os, re, sys

out = sys.argv[1]
CONTEXT, BATCH = 128, 32


def jsonl(path):
    return [json.loads(l) for l in open(path) if l.strip().startswith("{")]


def reach(ev, target):
    """Training seconds at the first eval at or below `target` (None: never)."""
    for e in ev:
        if e["loss"] <= target * (1 + 1e-9):
            return e["train_seconds"]
    return None


def shardline(name):
    ev = [l for l in jsonl(f"{out}/{name}/metrics.jsonl") if l.get("split") == "eval"]
    return ev, ev[-1]["step"] * BATCH * CONTEXT / ev[-1]["train_seconds"]


def torch(name):
    rows = jsonl(f"{out}/{name}.jsonl")
    return [r for r in rows if r.get("split") == "eval"], [r for r in rows if r.get("summary")][0]["tokens_per_second"]


peak = max(b["GFLOPs"] / 1e9 for b in json.load(open(f"{out}/sgemm.json"))["benchmarks"]
           if b.get("run_type") == "iteration")
logs = [f"{out}/{n}_shardline.log" for n in ("n1", "n2") if os.path.exists(f"{out}/{n}_shardline.log")]
flops = int(re.search(r"(\d+) training FLOPs per example", open(logs[0]).read()).group(1))
fmt = lambda t: "not reached" if t is None else f"{t:.1f} s"
print("| N | metric | shardline | PyTorch | shardline / PyTorch |")
print("| --- | --- | --- | --- | --- |")
for n, s_name, t_name, peer in ((1, "n1_shardline", "n1_torch", "PyTorch"), (2, "n2_shardline", "n2_ddp", "DDP gloo")):
    if not os.path.exists(f"{out}/{t_name}.jsonl"):
        continue
    s_ev, s_rate = shardline(s_name)
    t_ev, t_rate = torch(t_name)
    print(f"| {n} | tokens/s (eval excluded) | {s_rate:,.0f} | {t_rate:,.0f} ({peer}) | {s_rate / t_rate:.2f}x |")
    s_loss, t_loss = s_ev[-1]["loss"], t_ev[-1]["loss"]
    print(f"| {n} | final validation loss (bits per byte) | {s_loss:.4f} ({s_loss / 0.6931471805599453:.3f}) | "
          f"{t_loss:.4f} ({t_loss / 0.6931471805599453:.3f}) | {s_loss / t_loss:.4f} |")
    # Targets both runs reach: the worse of the two final losses (curves
    # from the same tokens still part by float rounding, so the better one
    # may never be reached by the other), and 2.2 bits per byte (the
    # austen_gpt goal), when both get there. Evals are the only clock.
    targets = [("the worse final validation loss", max(s_loss, t_loss))]
    if max(s_loss, t_loss) <= 2.2 * 0.6931471805599453:
        targets.append(("2.2 bits per byte", 2.2 * 0.6931471805599453))
    for label, target in targets:
        a, b = reach(s_ev, target), reach(t_ev, target)
        ratio = "" if a is None or b is None else f"{a / b:.2f}x the time"
        print(f"| {n} | time to {label} ({target:.4f}; evals every {s_ev[0]['step']} steps) | {fmt(a)} | {fmt(b)} "
              f"| {ratio} |")
    print(f"| {n} | validation loss at each eval (shardline / PyTorch) | "
          + ", ".join(f"{a['step']}: {a['loss']:.4f} / {b['loss']:.4f}" for a, b in zip(s_ev, t_ev)) + " | | |")
    mfu = lambda rate: rate / CONTEXT * flops / 1e9 / (n * peak) * 100
    print(f"| {n} | MFU ({n} x the sgemm peak of {peak:.1f} GFLOP/s, 1 thread) | {mfu(s_rate):.1f}% "
          f"| {mfu(t_rate):.1f}% | |")
check = jsonl(f"{out}/check.json")[0]
print()
print(f"Correctness (same weights, same batches): logits within {check['logits_max_rel_error']:.2e} of the largest, "
      f"first {check['steps']} losses within {check['loss_max_rel_error']:.2e} relative.")
