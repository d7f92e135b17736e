#!/usr/bin/env python3
"""Checks every `#include "..."` of the product code against the include rules
in docs/architecture.md (the ```include-rules block), so the folder map there
is a test, not a wish.

usage: include_rules_test.py SOURCE_ROOT

A folder may include itself and proto/; "common" in a rule stands for every
folder under common/; a folder without a rule may include nothing of ours.
Before checking the tree, it checks itself on a small tree with one
forbidden include, so it cannot pass by finding nothing.
"""
import os
import re
import sys
import tempfile

OURS = ("common/", "worker/", "coordinator/", "bench/", "tests/")
CHECKED = ("common", "worker", "coordinator", "bench")
INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]+"([^"]+)"', re.M)


def parse_rules(doc_text):
    m = re.search(r"```include-rules\n(.*?)```", doc_text, re.S)
    if not m:
        raise SystemExit("docs/architecture.md: no ```include-rules block")
    rules = {}
    for n, line in enumerate(m.group(1).splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        folder, sep, allowed = line.partition(":")
        if not sep:
            raise SystemExit(f"docs/architecture.md: include-rules line {n}: no ':' in {line!r}")
        folder = folder.strip()
        if folder in rules:
            raise SystemExit(f"docs/architecture.md: include-rules: {folder} listed twice")
        rules[folder] = set(allowed.split())
    return rules


def allowed(rules, folder, target):
    if target == folder or target == "proto" or target.startswith("proto/"):
        return True
    for a in rules.get(folder, ()):
        if a == target or (a == "common" and target.startswith("common/")):
            return True
    return False


def violations(root, rules):
    found = []
    for top in CHECKED:
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                if not name.endswith((".h", ".cc")):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                folder = os.path.dirname(rel)
                if folder not in rules:
                    found.append(f"{rel}: its folder {folder}/ has no include rule in docs/architecture.md")
                    continue
                text = open(path, encoding="utf-8", errors="replace").read()
                for m in INCLUDE.finditer(text):
                    inc = m.group(1)
                    if not inc.startswith(OURS):
                        continue
                    target = os.path.dirname(inc)
                    if not allowed(rules, folder, target):
                        line = text.count("\n", 0, m.start()) + 1
                        found.append(f"{rel}:{line}: {folder}/ may not include {inc}")
    return found


def self_test():
    rules = parse_rules("```include-rules\ncommon/platform:\nworker/model: common\ncoordinator: common\n```\n")
    with tempfile.TemporaryDirectory() as root:
        files = {
            "common/platform/env.h": '#include "proto/config.pb.h"\n',
            "worker/model/mlp.cc": '#include "common/platform/env.h"\n#include "worker/model/mlp.h"\n',
            "coordinator/job.cc": '#include "common/platform/env.h"\n\n#include "worker/model/mlp.h"\n',
        }
        for rel, text in files.items():
            os.makedirs(os.path.join(root, os.path.dirname(rel)), exist_ok=True)
            with open(os.path.join(root, rel), "w") as f:
                f.write(text)
        got = violations(root, rules)
        want = ["coordinator/job.cc:3: coordinator/ may not include worker/model/mlp.h"]
        if got != want:
            raise SystemExit(f"self-test: expected {want}, got {got}")


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    root = sys.argv[1]
    self_test()
    rules = parse_rules(open(os.path.join(root, "docs/architecture.md"), encoding="utf-8").read())
    found = violations(root, rules)
    for v in found:
        print(v)
    if found:
        print(f"{len(found)} include(s) break the rules in docs/architecture.md")
        return 1
    print(f"every include of {', '.join(CHECKED)} follows docs/architecture.md ({len(rules)} rules)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
