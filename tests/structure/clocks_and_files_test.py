#!/usr/bin/env python3
"""Checks that the product code reads clocks and files only through the Env
(common/platform/env.h, clock.h): no direct std::chrono clock, absl::Now(),
iostream file or stdio fopen outside the Env implementations, so a test's
Env can move time and fail files everywhere.

usage: clocks_and_files_test.py SOURCE_ROOT

Before checking the tree, it checks itself on a small tree with one direct
clock read, so it cannot pass by finding nothing.
"""
import os
import re
import sys
import tempfile

CHECKED = ("common", "worker", "coordinator")
# The Env implementations and the platform primitives under them.
EXEMPT = {
    "common/platform/posix_env.cc",  # the POSIX Env: the clocks and files themselves
    "common/platform/clock.h",       # the Env's clocks as absl types
    "common/platform/mutex.h",       # absl::Mutex deadlines are absl::Now()-based by contract
}
DIRECT = re.compile(
    r"std::chrono::(steady|system|high_resolution)_clock::now|absl::Now\(\)|std::[io]?fstream|\bfopen\(")


def violations(root):
    found = []
    for top in CHECKED:
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                if not name.endswith((".h", ".cc")):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, name), root)
                if rel in EXEMPT:
                    continue
                for n, line in enumerate(open(os.path.join(root, rel), encoding="utf-8", errors="replace"), 1):
                    code = line.split("//", 1)[0]
                    m = DIRECT.search(code)
                    if m:
                        found.append(f"{rel}:{n}: {m.group(0)} outside the Env (use common/platform/clock.h or Env)")
    return found


def self_test():
    with tempfile.TemporaryDirectory() as root:
        for rel, text in {
            "common/platform/posix_env.cc": "auto t = std::chrono::steady_clock::now();\n",
            "worker/train/loop.cc": "// absl::Now() in a comment is fine\nStopwatch w;\n",
            "coordinator/job.cc": "  const absl::Time now = absl::Now();\n",
        }.items():
            os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
            open(os.path.join(root, rel), "w").write(text)
        got = violations(root)
        if len(got) != 1 or not got[0].startswith("coordinator/job.cc:1:"):
            raise SystemExit(f"self-test failed: expected one finding in coordinator/job.cc, got {got}")


def main():
    self_test()
    found = violations(sys.argv[1])
    for f in found:
        print(f)
    if found:
        print(f"{len(found)} direct clock or file reads outside the Env")
        return 1
    print("every clock and file read of the product code goes through the Env")
    return 0


if __name__ == "__main__":
    sys.exit(main())
