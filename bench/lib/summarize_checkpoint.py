"""Medians of bench/drivers/checkpoint_bench.sh's JSON lines, as a Markdown table of
shardline / dd ratios (write + fsync; cold restore vs cold dd read; cached
restore vs cached dd read)."""
import json
import statistics
import sys


def main(path):
    rows = [json.loads(line) for line in open(path) if line.strip()]
    def median(impl, size, key, cold=None):
        vals = [r[key] for r in rows if r["impl"] == impl and r["size"] == size
                and key in r and (cold is None or r.get("cold") == cold)]
        return statistics.median(vals), len(vals)

    names = {"w2": "W2 state (params + momentum), 33.7 MB", "gib": "synthetic, 1.07 GB"}
    print("| what | size | shardline GB/s | disk (dd) GB/s | ratio | runs |")
    print("| --- | --- | --- | --- | --- | --- |")
    for size in ("w2", "gib"):
        for what, sl, ddk in (("write + fsync", ("write_GBps", None), "write_GBps"),
                              ("restore, cold cache", ("restore_GBps", True), "cold_read_GBps"),
                              ("restore, cached", ("restore_GBps", False), "cached_read_GBps")):
            s, n = median("shardline", size, sl[0], sl[1])
            d, _ = median("dd", size, ddk)
            print(f"| {what} | {names[size]} | {s:.2f} | {d:.2f} | {s / d:.2f}x | {n} |")


if __name__ == "__main__":
    main(sys.argv[1])
