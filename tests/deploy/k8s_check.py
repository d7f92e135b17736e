#!/usr/bin/env python3
"""deploy/k8s checked offline (no cluster here): every document parses;
kinds and API versions are real ones; names, labels, ports, volumes, the
PVC and the Secret are consistent across documents; every flag a container
passes exists in the real binary's --help; the image's binaries are the ones
the Dockerfile installs. A broken copy must fail, or the check could not.

    k8s_check.py SOURCE_DIR BIN_DIR
"""
import copy
import os
import re
import subprocess
import sys

import yaml

KNOWN = {
    ("v1", "Service"), ("v1", "PersistentVolumeClaim"), ("v1", "ConfigMap"), ("v1", "Secret"),
    ("apps/v1", "StatefulSet"), ("apps/v1", "Deployment"), ("batch/v1", "Job"),
    ("kustomize.config.k8s.io/v1beta1", "Kustomization"),
}


def load(src):
    k8s = os.path.join(src, "deploy", "k8s")
    kust = yaml.safe_load(open(os.path.join(k8s, "kustomization.yaml")))
    docs = []
    for name in kust["resources"]:
        path = os.path.join(k8s, name)
        if not os.path.exists(path):
            raise SystemExit(f"FAILED: kustomization.yaml lists {name}, which does not exist")
        docs += [d for d in yaml.safe_load_all(open(path)) if d]
    return kust, docs


def merge(base, patch):
    """A strategic-merge patch as kustomize applies these: maps merge, lists
    of named maps (containers, volumes) merge by name, other lists (args)
    are replaced."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for k, v in patch.items():
            out[k] = merge(base[k], v) if k in base else copy.deepcopy(v)
        return out
    named = lambda xs: all(isinstance(x, dict) and "name" in x for x in xs)
    if isinstance(base, list) and isinstance(patch, list) and named(base) and named(patch):
        out = [copy.deepcopy(x) for x in base]
        for p in patch:
            for i, b in enumerate(out):
                if b["name"] == p["name"]:
                    out[i] = merge(b, p)
                    break
            else:
                out.append(copy.deepcopy(p))
        return out
    return copy.deepcopy(patch)


def load_overlay(src, name):
    """deploy/k8s/<name>: the base ("..") and its own resources, patched."""
    here = os.path.join(src, "deploy", "k8s", name)
    kust = yaml.safe_load(open(os.path.join(here, "kustomization.yaml")))
    base_kust, docs = None, []
    for r in kust["resources"]:
        if r == "..":
            base_kust, base_docs = load(src)
            docs += base_docs
        else:
            docs += [d for d in yaml.safe_load_all(open(os.path.join(here, r))) if d]
    if base_kust is None:
        raise SystemExit(f"FAILED: {name}/kustomization.yaml does not build on the base (..)")
    for p in kust.get("patches", []):
        patch = yaml.safe_load(open(os.path.join(here, p["path"])))
        hits = [i for i, d in enumerate(docs)
                if d["kind"] == patch["kind"] and d["metadata"]["name"] == patch["metadata"]["name"]]
        if len(hits) != 1:
            raise SystemExit(f"FAILED: {name}/{p['path']} patches {patch['kind']} {patch['metadata']['name']}, "
                             f"which the overlay has {len(hits)} of")
        docs[hits[0]] = merge(docs[hits[0]], patch)
    return base_kust, docs


def flag(args, name, default=None):
    for a in args:
        if a.startswith(f"--{name}="):
            return a.split("=", 1)[1]
    return default


def check_islands(docs):
    """Two sites: the worker Jobs' ranks tile the coordinator's world, each
    Job one whole island (its --island), as the coordinator's islands cut it."""
    errors = []
    sets = {}
    for d in docs:
        if d["kind"] == "StatefulSet" and d["metadata"]["name"] == "shardline-coordinator":
            for a in d["spec"]["template"]["spec"]["containers"][0]["args"]:
                if a.startswith("--set="):
                    k, v = a[len("--set="):].split("=", 1)
                    sets[k] = v
    n, k = int(sets.get("runtime.num_workers", 1)), int(sets.get("collective.islands", 1))
    if k < 2 or n % k:
        return [f"coordinator: collective.islands={k} does not cut runtime.num_workers={n} into islands"]
    size, covered = n // k, []
    for d in docs:
        if d["kind"] != "Job":
            continue
        name, spec = d["metadata"]["name"], d["spec"]["template"]["spec"]
        worker = spec["containers"][0]["args"]
        init = spec.get("initContainers", [{}])[0].get("args", [])
        offset, island = int(flag(init, "rank_offset", 0)), flag(worker, "island")
        count = int(d["spec"]["completions"])
        if island is None:
            errors.append(f"{name}: no --island")
            continue
        if count != size or offset % size or int(island) != offset // size:
            errors.append(f"{name}: ranks {offset}..{offset + count - 1} as island {island}; islands of {size} "
                          f"put them in island {offset // size}")
        if flag(worker, "rank") not in (None, "$(JOB_COMPLETION_INDEX)") or (offset and flag(worker, "rank")):
            errors.append(f"{name}: --rank must be the completion index, or absent with --rank_offset")
        if "nodeSelector" not in spec:
            errors.append(f"{name}: not pinned to its site (nodeSelector)")
        covered += range(offset, offset + count)
    if sorted(covered) != list(range(n)):
        errors.append(f"the worker Jobs' ranks {sorted(covered)} are not 0..{n - 1}")
    return errors


def pod_specs(docs):
    for d in docs:
        if d["kind"] in ("StatefulSet", "Deployment", "Job"):
            yield d, d["spec"]["template"]


def check(kust, docs, src, bin_dir):
    errors = []
    if (kust.get("apiVersion"), kust.get("kind")) not in KNOWN:
        errors.append("kustomization.yaml: unknown apiVersion/kind")
    by_kind = {}
    for d in docs:
        key = (d.get("apiVersion"), d.get("kind"))
        if key not in KNOWN:
            errors.append(f"{d.get('metadata', {}).get('name')}: unknown apiVersion/kind {key}")
        by_kind.setdefault(d["kind"], {})[d["metadata"]["name"]] = d
    services = by_kind.get("Service", {})
    pvcs = by_kind.get("PersistentVolumeClaim", {})
    images = {i["name"] for i in kust.get("images", [])}
    dockerfile = open(os.path.join(src, "deploy", "Dockerfile")).read()
    helps = {}
    for owner, template in pod_specs(docs):
        name = owner["metadata"]["name"]
        labels = template["metadata"].get("labels", {})
        sel = owner["spec"].get("selector", {}).get("matchLabels")
        if sel is not None and any(labels.get(k) != v for k, v in sel.items()):
            errors.append(f"{name}: selector {sel} does not match its pod labels {labels}")
        if owner["kind"] == "StatefulSet" and owner["spec"]["serviceName"] not in services:
            errors.append(f"{name}: serviceName {owner['spec']['serviceName']} is no Service here")
        spec = template["spec"]
        if "subdomain" in spec and spec["subdomain"] not in services:
            errors.append(f"{name}: subdomain {spec['subdomain']} is no Service here")
        if owner["kind"] == "Job" and "podFailurePolicy" in owner["spec"] and spec.get("restartPolicy") != "Never":
            errors.append(f"{name}: podFailurePolicy needs restartPolicy Never")
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        for v in volumes.values():
            claim = v.get("persistentVolumeClaim", {}).get("claimName")
            if claim is not None and claim not in pvcs:
                errors.append(f"{name}: volume {v['name']} claims {claim}, which is no PVC here")
            secret = v.get("secret", {}).get("secretName")
            if secret is not None and secret != "shardline-token":
                errors.append(f"{name}: volume {v['name']} uses Secret {secret}; the docs create shardline-token")
        # Init containers are checked like the others, except for probes.
        for c, init in [(c, False) for c in spec["containers"]] + [(c, True) for c in spec.get("initContainers", [])]:
            cname = f"{name}/{c['name']}"
            if c["image"] not in images:
                errors.append(f"{cname}: image {c['image']} is not set in kustomization.yaml images")
            binary = c["command"][0]
            if f"/build/bin/{binary}" not in dockerfile:
                errors.append(f"{cname}: {binary} is not a binary the Dockerfile installs")
            args = c.get("args", [])
            # `shardline credential --rank=...`: the subcommand's own --help.
            sub = args[0] if args and not args[0].startswith("-") else None
            key = (binary, sub)
            if key not in helps:
                helps[key] = subprocess.run([os.path.join(bin_dir, binary)] + ([sub] if sub else []) + ["--help"],
                                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True).stdout
            for arg in args:
                flag = re.match(r"--([a-z_]+)", arg)
                if flag and f"--{flag.group(1)}" not in helps[key]:
                    errors.append(f"{cname}: {binary}{' ' + sub if sub else ''} has no flag --{flag.group(1)}")
                for var in re.findall(r"\$\(([A-Z_]+)\)", arg):
                    if var not in {e["name"] for e in c.get("env", [])}:
                        errors.append(f"{cname}: $({var}) is not declared in env, so it would not expand")
            ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
            for probe in () if init else ("readinessProbe", "livenessProbe"):
                p = c.get(probe)
                if p is None:
                    errors.append(f"{cname}: no {probe}")
                    continue
                port = p.get("grpc", p.get("httpGet", {})).get("port")
                if port not in ports.values() and port not in ports:
                    errors.append(f"{cname}: {probe} port {port} is no container port")
            for m in c.get("volumeMounts", []):
                if m["name"] not in volumes:
                    errors.append(f"{cname}: mounts {m['name']}, which is no volume")
            ann = template["metadata"].get("annotations", {})
            if not init and "prometheus.io/port" in ann and int(ann["prometheus.io/port"]) not in ports.values():
                errors.append(f"{cname}: prometheus.io/port {ann['prometheus.io/port']} is no container port")
            for arg in c.get("args", []):
                if arg.startswith("--metrics_listen=") and int(arg.rsplit(":", 1)[1]) != int(ann.get("prometheus.io/port", -1)):
                    errors.append(f"{cname}: metrics listen on {arg}, but Prometheus is told {ann.get('prometheus.io/port')}")
    for sname, s in services.items():
        targets = [(owner, template) for owner, template in pod_specs(docs)
                   if all(template["metadata"].get("labels", {}).get(k) == v for k, v in s["spec"]["selector"].items())]
        if not targets:
            errors.append(f"Service {sname}: its selector matches no pod template")
        for p in s["spec"]["ports"]:
            names = {q["name"] for _, t in targets for c in t["spec"]["containers"] for q in c.get("ports", [])}
            if isinstance(p.get("targetPort"), str) and p["targetPort"] not in names:
                errors.append(f"Service {sname}: targetPort {p['targetPort']} is no named container port")
    # The coordinator address the workers dial is the coordinator's Service.
    for owner, template in pod_specs(docs):
        for c in template["spec"]["containers"]:
            for arg in c.get("args", []):
                if arg.startswith("--coordinator="):
                    host, port = arg.split("=", 1)[1].rsplit(":", 1)
                    svc = services.get(host)
                    if svc is None or int(port) not in [p["port"] for p in svc["spec"]["ports"]]:
                        errors.append(f"{owner['metadata']['name']}: --coordinator={host}:{port} is no Service port")
    return errors


def passed(errors, what=""):
    """Prints each error; whether there were none."""
    for e in errors:
        print(f"FAILED: {what}{e}")
    return not errors


def main():
    src, bin_dir = sys.argv[1], sys.argv[2]
    kust, docs = load(src)
    if not passed(check(kust, docs, src, bin_dir)):
        return 1
    # The check must be able to fail: break one thing in a copy.
    broken = copy.deepcopy(docs)
    for d in broken:
        if d["kind"] == "Job":
            d["spec"]["template"]["spec"]["containers"][0]["args"].append("--no_such_flag=1")
    if not check(kust, broken, src, bin_dir):
        print("FAILED: a manifest with an unknown flag passed the check")
        return 1
    # Two sites: the overlay builds on the base and cuts the world in islands.
    base_kust, two = load_overlay(src, "two-sites")
    if not passed(check(base_kust, two, src, bin_dir) + check_islands(two), "two-sites: "):
        return 1
    broken = copy.deepcopy(two)
    for d in broken:
        if d["kind"] == "Job" and d["metadata"]["name"] == "shardline-worker-b":
            args = d["spec"]["template"]["spec"]["containers"][0]["args"]
            args[args.index("--island=1")] = "--island=0"
    if not check_islands(broken):
        print("FAILED: two-sites with site B as island 0 passed the check")
        return 1
    print(f"PASSED: {len(docs)} documents; two-sites: {len(two)} documents")
    return 0


if __name__ == "__main__":
    sys.exit(main())
