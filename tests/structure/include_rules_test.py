#!/usr/bin/env python3
"""Checks every include of the product code (`#include "..."`, `#include <...>`
and relative ones, `"../worker/x.h"`, resolved from the including file)
against the include rules
in docs/architecture.md (the ```include-rules block), so the folder map there
is a test, not a wish.

usage: include_rules_test.py SOURCE_ROOT

A folder may include itself and proto/; "common" in a rule stands for every
folder under common/; a folder without a rule may include nothing of ours.
The table itself must have no cycle (a folder that may include, through
others, itself) and may never let worker/ and coordinator/ include each
other. Before checking the tree, it checks itself on a small tree with one
forbidden include and on tables with a cycle and with worker -> coordinator,
so it cannot pass by finding nothing.
"""
import os
import re
import sys
import tempfile

OURS = ("common/", "worker/", "coordinator/", "bench/", "tests/")
CHECKED = ("common", "worker", "coordinator", "bench")
INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]+["<]([^">]+)[">]', re.M)


def resolve(folder, inc):
    """The root-relative path an include names, if it is one of ours: as
    written (`"worker/x.h"`, `<worker/x.h>`), or relative to the including
    file's folder (`"../worker/x.h"`, `"./x.h"`); None for anything else."""
    if inc.startswith(OURS):
        return inc
    if inc.startswith(("./", "../")):
        resolved = os.path.normpath(os.path.join(folder, inc))
        if resolved.startswith(OURS):
            return resolved
    return None


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


def expand(rules, target):
    """The folders a rule's word names: "common" is every common/ folder."""
    if target == "common":
        return sorted(f for f in rules if f.startswith("common/"))
    return [target]


def table_problems(rules):
    """A cycle in the table, and any rule joining worker/ and coordinator/."""
    found = []
    for folder, targets in sorted(rules.items()):
        for t in sorted(targets):
            for side, other in (("worker", "coordinator"), ("coordinator", "worker")):
                if (folder == side or folder.startswith(side + "/")) and (t == other or t.startswith(other + "/")):
                    found.append(f"include-rules: {folder} may include {t}: worker/ and coordinator/ never include "
                                 "each other (they meet in proto/ and common/)")
    graph = {f: [x for t in sorted(ts) for x in expand(rules, t) if x != f] for f, ts in rules.items()}
    state = {}
    path = []

    def visit(f):
        state[f] = "open"
        path.append(f)
        for g in graph.get(f, []):
            if state.get(g) == "open":
                cycle = path[path.index(g):] + [g]
                found.append("include-rules: a cycle: " + " -> ".join(cycle))
            elif g not in state:
                visit(g)
        path.pop()
        state[f] = "done"

    for f in sorted(graph):
        if f not in state:
            visit(f)
    return found


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
                    inc = resolve(folder, m.group(1))
                    if inc is None:
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
            # Issue 62: angle brackets and relative paths were not read.
            "coordinator/step.cc": '#include <vector>\n#include <worker/model/mlp.h>\n#include "./job.h"\n',
            "coordinator/plan.cc": '#include "../worker/model/mlp.h"\n#include "../common/platform/env.h"\n',
        }
        for rel, text in files.items():
            os.makedirs(os.path.join(root, os.path.dirname(rel)), exist_ok=True)
            with open(os.path.join(root, rel), "w") as f:
                f.write(text)
        got = violations(root, rules)
        want = ["coordinator/job.cc:3: coordinator/ may not include worker/model/mlp.h",
                "coordinator/plan.cc:1: coordinator/ may not include worker/model/mlp.h",
                "coordinator/step.cc:2: coordinator/ may not include worker/model/mlp.h"]
        if got != want:
            raise SystemExit(f"self-test: expected {want}, got {got}")
    if table_problems(rules):
        raise SystemExit(f"self-test: a good table was refused: {table_problems(rules)}")
    cyclic = parse_rules("```include-rules\ncommon/a: common/b\ncommon/b: common/c\ncommon/c: common\n```\n")
    got = table_problems(cyclic)
    if not any("a cycle: common/a -> common/b -> common/c -> common/a" in g for g in got):
        raise SystemExit(f"self-test: a cycle was not found: {got}")
    joined = parse_rules("```include-rules\ncommon/a:\nworker/model: common\ncoordinator: common worker/model\n```\n")
    got = table_problems(joined)
    if len(got) != 1 or "coordinator may include worker/model" not in got[0]:
        raise SystemExit(f"self-test: coordinator -> worker was not found: {got}")


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    root = sys.argv[1]
    self_test()
    rules = parse_rules(open(os.path.join(root, "docs/architecture.md"), encoding="utf-8").read())
    found = table_problems(rules) + violations(root, rules)
    for v in found:
        print(v)
    if found:
        print(f"{len(found)} problem(s) with the include rules of docs/architecture.md or the includes they govern")
        return 1
    print(f"every include of {', '.join(CHECKED)} follows docs/architecture.md ({len(rules)} rules)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
