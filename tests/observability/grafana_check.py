#!/usr/bin/env python3
"""Checks deploy/grafana/shardline.json (Grafana is not packaged in Debian).

  grafana_check.py DASHBOARD                    structure only
  grafana_check.py DASHBOARD --prometheus PORT  ... and every expression, run
                                                on a live Prometheus scraping a
                                                job, returns data
  grafana_check.py DASHBOARD --self-test        ... and broken copies fail

Structure: the keys Grafana's import needs; unique panel ids; a 24-column
grid with no overlaps; every target has a refId (unique in its panel) and an
expression using only the dashboard's variables or Grafana's built-ins, on
the ${DS_PROMETHEUS} data source; and every topic the dashboard promises is
drawn from the metric that carries it. Which metrics exist is checked
against a real scrape by check_metric_names.py.
"""
import copy
import json
import re
import sys
import urllib.parse
import urllib.request

BUILTINS = {"__rate_interval", "__interval", "__range", "__range_s"}
TYPES = {"timeseries", "stat", "row", "gauge", "bargauge", "table", "text"}
# What the dashboard must show, and a metric each must be drawn from.
TOPICS = {
    "step": "shardline_global_step",
    "samples/s": "shardline_samples_per_second",
    "loss": "shardline_loss",
    "accuracy": "shardline_eval_accuracy",
    "step-phase breakdown": "shardline_phase_seconds_total",
    "bytes on the wire": "shardline_transport_sent_bytes_total",
    "checkpoint save time": "shardline_worker_overhead_seconds_total",
    "last committed step": "shardline_last_checkpoint_step",
    "generations": "shardline_generation",
    "recoveries": "shardline_worker_losses_total",
    "goodput": "shardline_goodput_ratio",
    "badput by kind": "shardline_badput_seconds_total",
    "MFU": "shardline_mfu_ratio",
    "per-rank step time": "shardline_step_duration_seconds_sum",
    "stragglers": "shardline_straggler_score",
}


def all_panels(dash):
    out = []
    def walk(ps):
        for p in ps:
            out.append(p)
            walk(p.get("panels", []))
    walk(dash["panels"])
    return out


def problems(dash):
    errs = []
    for key in ("title", "uid", "schemaVersion", "panels", "templating"):
        if key not in dash:
            errs.append(f"missing top-level key {key}")
    if errs:
        return errs
    if not isinstance(dash["schemaVersion"], int) or dash["schemaVersion"] < 30:
        errs.append("schemaVersion must be an int >= 30")
    variables = {v["name"] for v in dash["templating"]["list"]}
    panels = all_panels(dash)
    ids = [p.get("id") for p in panels]
    if len(set(ids)) != len(ids) or not all(isinstance(i, int) for i in ids):
        errs.append(f"panel ids must be unique ints: {ids}")
    boxes = []
    exprs = []
    for p in panels:
        name = f"panel {p.get('id')} '{p.get('title')}'"
        if p.get("type") not in TYPES:
            errs.append(f"{name}: unknown type {p.get('type')}")
        g = p.get("gridPos", {})
        if not all(isinstance(g.get(k), int) for k in "xywh") or g["w"] <= 0 or g["h"] <= 0 or g["x"] < 0 or g["x"] + g["w"] > 24:
            errs.append(f"{name}: gridPos {g} is not inside the 24-column grid")
            continue
        for other_name, o in boxes:
            if g["x"] < o["x"] + o["w"] and o["x"] < g["x"] + g["w"] and g["y"] < o["y"] + o["h"] and o["y"] < g["y"] + g["h"]:
                errs.append(f"{name} overlaps {other_name}")
        boxes.append((name, g))
        if p["type"] == "row":
            continue
        targets = p.get("targets", [])
        if not targets:
            errs.append(f"{name}: no targets")
        refs = [t.get("refId") for t in targets]
        if len(set(refs)) != len(refs) or None in refs:
            errs.append(f"{name}: refIds {refs} must be present and unique")
        for t in targets:
            ds = t.get("datasource", p.get("datasource", {}))
            if ds.get("uid") != "${DS_PROMETHEUS}":
                errs.append(f"{name}: data source {ds} is not ${{DS_PROMETHEUS}}")
            e = t.get("expr", "")
            if not e.strip():
                errs.append(f"{name}: empty expression")
            for var in re.findall(r"\$\{?(\w+)", e):
                if var not in variables and var not in BUILTINS:
                    errs.append(f"{name}: expression uses undefined ${var}")
            exprs.append(e)
    joined = "\n".join(exprs)
    for topic, metric in TOPICS.items():
        if not re.search(r"\b" + re.escape(metric) + r"\b", joined):
            errs.append(f"no panel shows {topic} (from {metric})")
    return errs


def live(dash, port):
    errs = []
    for p in all_panels(dash):
        for t in p.get("targets", []):
            e = t["expr"].replace("$__rate_interval", "10s").replace("$__interval", "10s")
            e = re.sub(r"\$\{?job\}?", ".*", e)
            url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": e})
            try:
                with urllib.request.urlopen(url, timeout=10) as r:
                    res = json.load(r)
            except Exception as ex:  # an HTTP 400 is a bad expression
                errs.append(f"panel '{p['title']}' {t['refId']}: {e}: {ex}")
                continue
            if res.get("status") != "success" or not res["data"]["result"]:
                errs.append(f"panel '{p['title']}' {t['refId']}: no data for {e}")
    return errs


def main():
    path = sys.argv[1]
    dash = json.load(open(path))
    errs = problems(dash)
    if "--prometheus" in sys.argv:
        errs += live(dash, sys.argv[sys.argv.index("--prometheus") + 1])
    if "--self-test" in sys.argv:
        for what, breaks in (("an overlap", lambda d: all_panels(d)[2]["gridPos"].update(x=0)),
                             ("an undefined variable", lambda d: all_panels(d)[1]["targets"][0].update(expr="up{x=\"$nope\"}")),
                             ("a missing topic", lambda d: [t.update(expr="up") for p in all_panels(d) for t in p.get("targets", [])])):
            broken = copy.deepcopy(dash)
            breaks(broken)
            if not problems(broken):
                errs.append(f"self-test: a dashboard with {what} passed")
    if errs:
        print("FAILED:\n  " + "\n  ".join(errs))
        sys.exit(1)
    print(f"{path}: {len(all_panels(dash))} panels, structure ok" + (", every expression returns data" if "--prometheus" in sys.argv else ""))


if __name__ == "__main__":
    main()
