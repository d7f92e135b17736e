#!/usr/bin/env python3
"""Checks the sizes a reader meets first: no product file (common/, worker/,
coordinator/) over 500 lines, and no function over 80 lines in the product
code or bench/ (docs/architecture.md, "Shape").

A function here is what the code's own layout makes one: a line at column 0
that opens a parameter list and, within a few lines, a brace, up to the next
line that is a column-0 `}`. Namespaces do not indent in this code base, so
every free function and out-of-line member is found; a member defined inside
its class body is indented and not counted (those are kept short by review).

usage: sizes_test.py SOURCE_ROOT

Before checking the tree, it checks itself on a small tree with one long file
and one long function, so it cannot pass by finding nothing.
"""
import os
import re
import sys
import tempfile

FILE_LIMIT = 500
FUNCTION_LIMIT = 80
FILE_CHECKED = ("common", "worker", "coordinator")
FUNCTION_CHECKED = ("common", "worker", "coordinator", "bench")
NOT_A_FUNCTION = ("namespace", "struct", "class", "enum", "union", "extern", "#", "//",
                  "}", "using", "template", "typedef", "static_assert")
NAME = re.compile(r"([\w:~]+)\s*\(")


def sources(root, tops):
    for top in tops:
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                if name.endswith((".h", ".cc")):
                    yield os.path.relpath(os.path.join(dirpath, name), root)


def long_functions(lines, limit):
    """(first line, length, name) of every function longer than `limit`."""
    found = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line and not line[0].isspace() and "(" in line and not line.startswith(NOT_A_FUNCTION):
            k = i
            while k < len(lines) and k - i < 8 and not lines[k].rstrip().endswith(("{", ";", "}")):
                k += 1
            if k < len(lines) and lines[k].rstrip().endswith("{"):
                j = k + 1
                while j < len(lines) and not lines[j].startswith("}"):
                    j += 1
                length = j - i + 1
                if length > limit:
                    name = NAME.search(line)
                    found.append((i + 1, length, name.group(1) if name else "?"))
                i = j
        i += 1
    return found


def violations(root):
    found = []
    for rel in sources(root, FILE_CHECKED):
        n = sum(1 for _ in open(os.path.join(root, rel), encoding="utf-8", errors="replace"))
        if n > FILE_LIMIT:
            found.append(f"{rel}: {n} lines (at most {FILE_LIMIT}): split it by concern")
    for rel in sources(root, FUNCTION_CHECKED):
        lines = open(os.path.join(root, rel), encoding="utf-8", errors="replace").read().split("\n")
        for first, length, name in long_functions(lines, FUNCTION_LIMIT):
            found.append(f"{rel}:{first}: {name} is {length} lines (at most {FUNCTION_LIMIT})")
    return found


def self_check():
    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(os.path.join(tmp, "worker"))
        os.makedirs(os.path.join(tmp, "bench"))
        with open(os.path.join(tmp, "worker", "big.cc"), "w") as f:
            f.write("int x;\n" * (FILE_LIMIT + 1))
        with open(os.path.join(tmp, "bench", "long.cc"), "w") as f:
            f.write("namespace b {\n\nint Long(int a,\n         int b) {\n")
            f.write("  a += b;\n" * FUNCTION_LIMIT)
            f.write("  return a;\n}\n\nint Short() {\n  return 1;\n}\n\n}  // namespace b\n")
        found = violations(tmp)
        want = ["worker/big.cc: ", "bench/long.cc:3: Long is "]
        if len(found) != 2 or not all(any(v.startswith(w) for v in found) for w in want):
            print("self-check failed: expected one long file and one long function, got:", found)
            return False
    return True


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    if not self_check():
        return 1
    found = violations(sys.argv[1])
    for v in found:
        print(v)
    if found:
        print(f"{len(found)} size violation(s)")
        return 1
    print("every product file within", FILE_LIMIT, "lines, every function within", FUNCTION_LIMIT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
