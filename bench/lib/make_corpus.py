#!/usr/bin/env python3
"""A corpus of any size from a text: its lines drawn with replacement by a
seeded generator, written until the file holds at least SIZE bytes.

usage: make_corpus.py TEXT OUT SIZE_BYTES [SEED]
"""
import random
import sys


def main():
    src, out, size = sys.argv[1], sys.argv[2], int(float(sys.argv[3]))
    seed = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    lines = open(src, "rb").read().split(b"\n")
    lines = [l + b"\n" for l in lines if l.strip()]
    rng = random.Random(seed)
    written = 0
    with open(out, "wb") as f:
        while written < size:
            block = b"".join(rng.choices(lines, k=20000))
            f.write(block)
            written += len(block)
    print(f"{out}: {written} bytes, {len(lines)} distinct lines of {src}, seed {seed}")


if __name__ == "__main__":
    main()
