"""What a shardline worker's log and metrics.jsonl say, for bench scripts.

One parser for the lines benches read, so a change to their wording breaks
one place: the sgemm rate (worker_main.cc), the run's shape
(train_loop.cc), the shard and optimizer-state sizes (worker_metrics.cc),
the per-step phases of the final line (worker_lifecycle.cc), and the
steady samples/s of metrics.jsonl's train records. Each returns None when
its line is not there.

    import sys; sys.path.insert(0, "bench/lib")   # or run a script in bench/lib/
    from worker_log import phases
"""
import re
import statistics

PHASES = ("compute", "reduce_scatter", "optimizer", "all_gather")


def phases(text):
    """Mean ms per step of each phase (PHASES), plus "background" and
    "hidden" ms when the collectives ran in the background."""
    m = re.search(r"per step: compute ([\d.]+) ms, reduce-scatter ([\d.]+) ms, optimizer ([\d.]+) ms, "
                  r"all-gather ([\d.]+) ms(, collectives ([\d.]+) ms in the background \(([\d.]+) ms hidden\))?",
                  text)
    if not m:
        return None
    p = dict(zip(PHASES, map(float, m.groups()[:4])))
    if m.group(6):
        p["background"], p["hidden"] = float(m.group(6)), float(m.group(7))
    return p


def training(text):
    """The run's shape: global batch, parameters, training FLOPs per example, world size."""
    m = re.search(r"global batch (\d+)\) of .* with (\d+) parameters, (\d+) training FLOPs per example, "
                  r"world size (\d+)", text)
    if not m:
        return None
    return dict(zip(("batch", "params", "flops", "world"), map(int, m.groups())))


def owned(text):
    """(parameter bytes, optimizer-state bytes) this rank owns."""
    m = re.search(r"owns \d+ parameters \((\d+) bytes\) and (\d+) bytes of optimizer state", text)
    return (int(m.group(1)), int(m.group(2))) if m else None


def sgemm_flops(text):
    """The sgemm rate the worker measured at start, FLOP/s."""
    m = re.search(r"(\d+) GFLOP/s sgemm", text)
    return float(m.group(1)) * 1e9 if m else None


def steady_samples_per_second(records):
    """Median samples/s of the train records after the first (warm-up)."""
    train = [r for r in records if r.get("split") == "train"]
    return statistics.median(r["samples_per_second"] for r in train[1:]) if len(train) > 1 else None
