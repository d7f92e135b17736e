#!/usr/bin/env python3
"""Every metric that deploy/ names must be one a real job exports.

  check_metric_names.py PROMETHEUS_PORT FILE... [--documented DOC.md]

Reads the metric names a running Prometheus has scraped from the job
(/api/v1/label/__name__/values), then every PromQL expression in each FILE
(a Prometheus rules file: `expr:`; a Grafana dashboard: every target's
`expr`), and fails naming each shardline_* metric (histogram suffixes
_bucket/_sum/_count included) that no scrape produced. Recording-rule names
(level:metric:operations) count as defined by the rules file. With
--documented, the metric tables of DOC.md must list exactly the exported
shardline_* metrics.
"""
import json
import re
import sys
import urllib.request

import yaml

METRIC = re.compile(r"\b(shardline_[a-zA-Z0-9_]+)")


def exprs_of(path):
    if path.endswith(".json"):
        with open(path) as f:
            dash = json.load(f)
        out = []
        def walk(panels):
            for p in panels:
                for t in p.get("targets", []):
                    out.append(t["expr"])
                walk(p.get("panels", []))
        walk(dash["panels"])
        for v in dash.get("templating", {}).get("list", []):
            q = v.get("query")
            if isinstance(q, dict):
                q = q.get("query")
            if q:
                out.append(q)
        return out
    with open(path) as f:
        rules = yaml.safe_load(f)
    return [r["expr"] for g in rules["groups"] for r in g["rules"]]


def documented(path):
    """The metric names of a Markdown file's table rows ("| `name{labels}` | type | ...")."""
    names = set()
    for line in open(path):
        if line.startswith("| `shardline_"):
            first_cell = line.split("|")[1]
            names.update(re.findall(r"`(shardline_[a-z0-9_]+)", first_cell))
    return names


def check_documented(doc, scraped):
    """Both ways: every exported shardline_* metric is in the doc's tables,
    and every metric there is exported."""
    exported = set()
    for name in scraped:
        if not name.startswith("shardline_"):
            continue
        for suffix in ("_bucket", "_sum", "_count"):  # a histogram's series
            if name.endswith(suffix) and name[: -len(suffix)] + "_bucket" in scraped:
                name = name[: -len(suffix)]
        exported.add(name)
    listed = documented(doc)
    errs = [f"exported but not in {doc}: {n}" for n in sorted(exported - listed)]
    errs += [f"in {doc} but not exported: {n}" for n in sorted(listed - exported)]
    return errs


def main():
    args = sys.argv[1:]
    doc = None
    if "--documented" in args:
        doc = args[args.index("--documented") + 1]
        del args[args.index("--documented"):args.index("--documented") + 2]
    port, files = args[0], args[1:]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/label/__name__/values", timeout=10) as r:
        scraped = set(json.load(r)["data"])
    if doc is not None:
        errs = check_documented(doc, scraped)
        if errs:
            print("FAILED:\n  " + "\n  ".join(errs))
            sys.exit(1)
        print(f"{doc}: every exported metric is documented and every documented one exported")
    missing = []
    checked = 0
    for path in files:
        for expr in exprs_of(path):
            for name in METRIC.findall(expr):
                # A recording rule's level:name:ops names its source metric in
                # the middle; only plain metric names are looked up.
                if re.search(r":" + re.escape(name) + r"(:|\b)", expr):
                    continue
                checked += 1
                if name not in scraped:
                    missing.append(f"{path}: {name} (in: {' '.join(expr.split())[:100]})")
    if missing:
        print("FAILED: metrics named but not exported by a running job:\n  " + "\n  ".join(sorted(set(missing))))
        sys.exit(1)
    if checked == 0:
        print("FAILED: no metric names found in " + " ".join(files))
        sys.exit(1)
    print(f"all {checked} metric references in {len(files)} files are exported")


if __name__ == "__main__":
    main()
