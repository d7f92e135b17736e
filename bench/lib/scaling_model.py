#!/usr/bin/python3
"""The calibrated alpha-beta model of a shardline step (docs/scaling.md).

Reads bench/drivers/scaling_bench.sh's measurements in OUT, fits the model's few
constants to some of them, checks it against the others, and predicts
W2 and the CNN at N = 8 .. 1,024 workers on 10 and 25 Gbit/s links.
Prints markdown.

    bench/lib/scaling_model.py bench/out/scaling "none 10gbit 2500mbit" [--json FILE]

With --json, also writes the constants, the checks and the predictions to
FILE (tests/bench/scaling_model_test.py reads it).

The model (all times in seconds; N workers, P parameters, B samples per
step per worker, C cores on the host the measured processes share):

    s(N)        = max(1, N / C): processes per core, 1 on a cluster
    k messages of m bytes each, in a row from every host:
        k (a0 + s a1) + max(k m s b, W) + min(g s b, g w, W),
                  W = (k m - burst)+ w the wire time, g = min(m, 1 MiB)
                  a0 + a1 per message, of which a1 is CPU work (gRPC,
                  protobuf) that N processes on C cores queue for and a0
                  is waiting (wake-ups, the network stack's latency); b CPU
                  per byte (copies, sums, the kernel's socket work); w per
                  byte on the wire (8 / the link's iperf3 rate; 0 when the
                  link is not shaped: there the CPU is the link); burst the
                  bytes a tc tbf link lets out at once (its configured
                  bucket, bench/lib/sim_hosts.sh; 0 on other links),
                  assumed full when the operation starts. The last
                  term is the pipeline's fill: the ring sends in
                  segments of at most 1 MiB (CollectiveOptions::
                  max_segment_bytes), each through two stages, the CPU and
                  the wire, so the slower stage's time is paid plus one
                  segment through the faster (0 on an unshaped link)
    message of m bytes          = the above with k = 1
    ring all-reduce of S bytes  = 2 (N - 1) messages of S / N
    reduce-scatter = all-gather = (N - 1) messages of 4 P / N
    scalar all-reduce           = log2(N) a2 with a core per rank (s = 1),
                  log2(N) max(a2, s c2) with s > 1 (recursive doubling:
                  every round all N ranks at once; a2 a round's latency,
                  c2 the CPU each rank's round costs when ranks take turns
                  on the cores: a wake-up is then a context switch)
    compute     = s F B / (eta R)   F training FLOPs per example, R the
                  host's sgemm rate, eta the share of it a step reaches
                  (fitted per model)
    optimizer   = s u P / N + scalar all-reduce
    step        = compute + reduce-scatter + optimizer + all-gather
                  (collective.overlap=false: one after the other)
    recovery    = boot + setup P + formation(N) + restore + step,
                  restore = message(state bytes of one shard) + all-gather

Fitted: a0, a1 and b on each unshaped link (loopback; veth between
namespaces) from its ring points at N=2 and 4; a2 from its scalar
all-reduce at N=2 and c2 from N=4; R the host's sgemm rate, the median of
what every measured worker probed at start (one probe is noisy); eta per
model and u from the N=2 loopback runs; boot and setup from W1's and W2's
recoveries at N=2; formation(N) a line through the simulated-worker
formation times. Everything else is a check. Each collective point is the
median of its REPEATS rounds.
"""
import glob, json, math, os, statistics, sys

from tbf import burst as tbf_burst
from worker_log import owned, phases, sgemm_flops, steady_samples_per_second, training

ARGS = list(sys.argv[1:])
JSON_OUT = None
if "--json" in ARGS:
    i = ARGS.index("--json")
    JSON_OUT = ARGS[i + 1]
    del ARGS[i:i + 2]
OUT = ARGS[0]
RATES = ARGS[1].split() if len(ARGS) > 1 else ["none", "10gbit", "2500mbit"]
LINKS = ["lo"] + RATES
CORES = int(open(f"{OUT}/cores").read()) if os.path.exists(f"{OUT}/cores") else os.cpu_count()
LINK_NAME = {"lo": "loopback", "none": "veth, unshaped"}


def link_name(link):
    return LINK_NAME.get(link, f"veth, tbf {link}")


def jsonl(path):
    try:
        return [json.loads(l) for l in open(path) if l.strip().startswith("{")]
    except OSError:
        return []


# ---------------------------------------------------------------- measurements

def iperf_bps(link):
    try:
        j = json.load(open(f"{OUT}/{link}/iperf.json"))
        return j["end"]["sum_received"]["bits_per_second"]
    except (OSError, KeyError, ValueError):
        return None


def medians(rows):
    """[(key..., seconds)] with one row per key: the median of its repeats."""
    by_key = {}
    for *key, seconds in rows:
        by_key.setdefault(tuple(key), []).append(seconds)
    return [(*key, statistics.median(v)) for key, v in sorted(by_key.items())]


def ring_points(link):
    """(N, bytes, seconds) per ring point: the median of the runs' medians
    (scaling_bench.sh measures every point REPEATS times, in rounds)."""
    return medians([(p["world"], p["bytes"], p["median_s"]) for p in jsonl(f"{OUT}/{link}/ring.jsonl")
                    if p["op"] == "allreduce"])


def scalar_points(link):
    return medians([(p["world"], p["median_s"]) for p in jsonl(f"{OUT}/{link}/scalars.jsonl") if p["op"] == "scalars"])


class Run:
    """One training run: what its rank 0 logged and its steady samples/s."""

    def __init__(self, d):
        log = f"{d}/logs/worker-0.log" if os.path.exists(f"{d}/logs/worker-0.log") else f"{d}/worker-0.log"
        text = open(log).read()
        self.sgemm = sgemm_flops(text)
        shape = training(text)
        self.batch, self.params, self.flops, self.n = shape["batch"], shape["params"], shape["flops"], shape["world"]
        param_bytes, state_bytes = owned(text)
        self.state_per_param = state_bytes / param_bytes
        p = phases(text)
        self.compute, self.rs, self.opt, self.ag = (p[k] / 1e3 for k in ("compute", "reduce_scatter", "optimizer",
                                                                           "all_gather"))
        self.samples_per_s = steady_samples_per_second(jsonl(f"{d}/metrics.jsonl"))
        if None in (self.sgemm, self.samples_per_s):
            raise ValueError(f"{d}: the run's log or metrics are incomplete")


def run(link, model, n):
    try:
        return Run(f"{OUT}/{link}/{model}_n{n}")
    except (OSError, TypeError, ValueError):
        return None


def recovery(name):
    try:
        return statistics.median(float(l.split()[1]) for l in open(f"{OUT}/{name}/times.txt"))
    except (OSError, statistics.StatisticsError):
        return None


def formation_points():
    pts = []
    for f in glob.glob(f"{OUT}/control_plane/n*/load.jsonl"):
        for p in jsonl(f):
            if p.get("phase") == "formation":
                pts.append((p["workers"], p["seconds"]))
    return sorted(pts)


# ---------------------------------------------------------------- fitting

def fit(rows):
    """Least squares in relative error: rows of (x, y) for y ~ x . p; returns p."""
    k = len(rows[0][0])
    a = [[0.0] * (k + 1) for _ in range(k)]  # normal equations, augmented
    for x, y in rows:
        w = 1.0 / (y * y)
        for i in range(k):
            for j in range(k):
                a[i][j] += w * x[i] * x[j]
            a[i][k] += w * x[i] * y
    for c in range(k):  # Gauss-Jordan with partial pivoting
        p = max(range(c, k), key=lambda r: abs(a[r][c]))
        a[c], a[p] = a[p], a[c]
        for r in range(k):
            if r != c and a[c][c]:
                f = a[r][c] / a[c][c]
                a[r] = [v - f * u for v, u in zip(a[r], a[c])]
    return [a[i][k] / a[i][i] for i in range(k)]


def line(points):
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    slope = sum((x - mx) * (y - my) for x, y in points) / sxx if sxx else 0.0
    return my - slope * mx, slope


SEGMENT = 1 << 20  # CollectiveOptions::max_segment_bytes: the ring's pipeline unit


class Link:
    """A link's costs, and how the N processes on it share cores: `cores`
    of them on one host (the measurements), or None: a host each."""

    def __init__(self, a0, a1, b, w, a2, c2, cores=None, burst=0):
        self.a0, self.a1, self.b, self.w, self.a2, self.c2, self.cores = a0, a1, b, w, a2, c2, cores
        self.burst = burst

    def share(self, n):
        return max(1.0, n / self.cores) if self.cores else 1.0

    def messages(self, n, k, m):
        """k messages of m bytes in a row from every host: the slower of the
        CPU and the wire, plus one segment through the faster (the fill of
        the segment pipeline; nothing when the link is unshaped or the
        bytes fit in the tbf burst)."""
        s = self.share(n)
        cpu = k * m * s * self.b
        wire = max(0.0, k * m - self.burst) * self.w
        g = min(m, SEGMENT)
        fill = min(g * s * self.b, g * self.w, wire)
        return k * (self.a0 + s * self.a1) + max(cpu, wire) + fill

    def message(self, n, m):
        return self.messages(n, 1, m)

    def ring_allreduce(self, n, size):
        return self.messages(n, 2 * (n - 1), size / n)

    def reduce_scatter(self, n, params):
        return self.messages(n, n - 1, 4.0 * params / n)

    def scalars(self, n):
        if n <= 1:
            return 0.0
        s = self.share(n)
        return math.log2(n) * (self.a2 if s <= 1 else max(self.a2, s * self.c2))


# The points the constants came from: (what, measured, model, unit, note);
# `model` None when the point defines a constant by itself (`note` says how).
fitted = []


FIT_WORLDS = (2, 4)


def fit_link(link):
    def s(n):
        return max(1.0, n / CORES)
    rows = [((2.0 * (n - 1), 2.0 * (n - 1) * s(n), 2.0 * (n - 1) * size / n * s(n)), t)
            for n, size, t in ring_points(link) if n in FIT_WORLDS]
    scalar = dict(scalar_points(link))
    if len(rows) < 3 or 2 not in scalar or 4 not in scalar:
        return None
    # a2: the one round of N=2, a core per rank; c2: N=4's two rounds, s(4)
    # ranks per core.
    L = Link(*fit(rows), 0.0, scalar[2], scalar[4] / (2 * s(4)), CORES)
    for n in (2, 4):
        fitted.append((f"scalar all-reduce, {link_name(link)}, N={n}", scalar[n], None, "µs",
                       "(defines a2)" if n == 2 else "(defines c2)"))
    for n, size, t in ring_points(link):
        if n in FIT_WORLDS:
            fitted.append((f"ring all-reduce {size:,} B, {link_name(link)}, N={n}", t, L.ring_allreduce(n, size),
                           "ms", ""))
    return L


links = {"lo": fit_link("lo")}
veth = fit_link("none")
for rate in RATES:
    if rate == "none":
        links[rate] = veth
    elif veth is not None and iperf_bps(rate):
        links[rate] = Link(veth.a0, veth.a1, veth.b, 8.0 / iperf_bps(rate), veth.a2, veth.c2, CORES,
                           tbf_burst(rate))


class Model:
    """A model's step: its shape (parameters, FLOPs per example, optimizer
    state per parameter) and its constants (sgemm rate, eta, u)."""

    def __init__(self, name, params, flops, state_per_param, sgemm, eta, u):
        self.name, self.params, self.flops, self.state_per_param = name, params, flops, state_per_param
        self.sgemm, self.eta, self.u = sgemm, eta, u

    @classmethod
    def calibrated(cls, name, calib, u=None):
        """eta (and u, unless given) from a calibration run on loopback."""
        lo = links["lo"]
        s = lo.share(calib.n)
        eta = s * calib.flops * (calib.batch / calib.n) / HOST_SGEMM / calib.compute
        fits_u = u is None
        if fits_u:
            u = (calib.opt - lo.scalars(calib.n)) / (s * calib.params / calib.n)
        m = cls(name, calib.params, calib.flops, calib.state_per_param, HOST_SGEMM, eta, u)
        fitted.append((f"{name} compute phase, loopback, N={calib.n}", calib.compute,
                       m.compute(lo, calib.n, calib.batch / calib.n), "ms", ""))
        if fits_u:
            fitted.append((f"{name} optimizer phase, loopback, N={calib.n}", calib.opt, None, "ms",
                           "(defines a constant)"))
        return m

    def compute(self, link, n, per_worker):
        return link.share(n) * self.flops * per_worker / (self.sgemm * self.eta)

    def phases(self, link, n, per_worker):
        comm = link.reduce_scatter(n, self.params) if n > 1 else 0.0
        opt = link.share(n) * self.u * self.params / n + link.scalars(n)
        return self.compute(link, n, per_worker), comm, opt, comm

    def step(self, link, n, per_worker):
        return sum(self.phases(link, n, per_worker))

    def restore(self, link, n):
        """The replacement's shard (parameters and optimizer state) from one peer, then the all-gather."""
        shard = 4.0 * self.params / n * (1.0 + self.state_per_param)
        return link.message(n, shard) + link.reduce_scatter(n, self.params)


# ---------------------------------------------------------------- report

def ms(x):
    return f"{x * 1e3:,.1f}" if x < 10 else f"{x * 1e3:,.0f}"


def us(x):
    return f"{x * 1e6:,.0f}"


checks = []  # (what, measured, predicted, unit)


print(f"Host: {CORES} cores shared by every process of a measurement.\n")
print("### Fitted constants\n")
print("| link | iperf3 | ring a0: waiting per message | ring a1: CPU per message | b: CPU per byte | "
      "w: wire per byte | tbf burst | doubling a2: per round | doubling c2: per rank-round, sharing cores |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for link in LINKS:
    L = links.get(link)
    if L is None:
        print(f"| {link_name(link)} | - | not measured | | |")
        continue
    bps = iperf_bps(link)
    src = "fitted" if link in ("lo", "none") else "veth's"
    print(f"| {link_name(link)} | {bps / 1e9:.2f} Gbit/s |" if bps else f"| {link_name(link)} | - |",
          f"{us(L.a0)} µs ({src}) | {us(L.a1)} µs ({src}) | {L.b * 1e9:.3f} ns ({src}) |",
          f"{L.w * 1e9:.3f} ns (iperf3) |" if L.w else "0 (unshaped) |",
          f"{L.burst / 1e3:,.0f} KB (sim_shape) |" if L.burst else "- |", f"{us(L.a2)} µs ({src}) |",
          f"{us(L.c2)} µs ({src}) |")

# The host's sgemm rate: every measured training run's rank 0 probed it at
# start; one short probe can land on a busy moment (55 against 105 GFLOP/s
# seen), so the model takes their median.
SGEMM_PROBES = [r.sgemm for r in (run(link, key, n) for link in LINKS for key in ("w2", "cnn") for n in (2, 3, 4, 8))
                if r is not None]
HOST_SGEMM = statistics.median(SGEMM_PROBES) if SGEMM_PROBES else None
models = {}
w2 = run("lo", "w2", 2)
if w2 and HOST_SGEMM and links.get("lo"):
    models["W2"] = Model.calibrated("W2", w2)
cnn = run("lo", "cnn", 2)
if cnn and "W2" in models:
    models["CNN"] = Model.calibrated("CNN", cnn, u=models["W2"].u)
print()
for name, m in models.items():
    print(f"- {name}: {m.params:,} parameters, {m.flops / 1e6:.1f} MFLOP per training example; "
          f"eta = {m.eta:.2f} of the host's sgemm rate ({m.sgemm / 1e9:.0f} GFLOP/s, the median of "
          f"{len(SGEMM_PROBES)} workers' probes, {min(SGEMM_PROBES) / 1e9:.0f}-{max(SGEMM_PROBES) / 1e9:.0f})"
          + (f"; u = {m.u * 1e9:.2f} ns per owned parameter (the optimizer)" if name == "W2" else
             " (u: W2's)"))

# Checks: collectives.
for link in LINKS:
    L = links.get(link)
    if L is None:
        continue
    for n, size, t in ring_points(link):
        if n not in FIT_WORLDS or link not in ("lo", "none"):
            checks.append((f"ring all-reduce {size / 2**20:g} MiB, {link_name(link)}, N={n}"
                           if size >= 2**20 else f"ring all-reduce {size // 1024} KiB, {link_name(link)}, N={n}",
                           t, L.ring_allreduce(n, size), "ms"))
    for n, t in scalar_points(link):
        if n not in (2, 4) or link not in ("lo", "none"):
            checks.append((f"scalar all-reduce, {link_name(link)}, N={n}", t, L.scalars(n), "µs"))

# Checks: training steps.
for name, key in (("W2", "w2"), ("CNN", "cnn")):
    m = models.get(name)
    if m is None:
        continue
    for link in LINKS:
        L = links.get(link)
        for n in (2, 3, 4, 8):
            r = run(link, key, n)
            if r is None or L is None or (link == "lo" and n == 2):
                continue
            pred = m.step(L, n, r.batch / n)
            checks.append((f"{name} samples/s, {link_name(link)}, N={n}", r.samples_per_s, r.batch / pred, "/s"))

# Checks: recovery. recovery = boot + setup P + formation(N) + restore + step:
# boot (process start, sgemm probe, data) and setup (per parameter: what a
# worker builds before its restore) solved from W1 and W2 at N=2; W2 at N=4
# and the CNN at N=2 are checks.
form = formation_points()
form_line = line(form) if len(form) >= 2 else (0.0, 0.0)


def formation(n):
    return form_line[0] + form_line[1] * n


def recovery_case(name):
    """(model with the run's shape, N, per-worker batch, median seconds) of recovery_<name>."""
    t = recovery(f"recovery_{name}")
    if t is None or "W2" not in models:
        return None
    shape = training(open(f"{OUT}/recovery_{name}/memory/logs/worker-0.log").read())
    like = models["CNN"] if name.startswith("cnn") and "CNN" in models else models["W2"]
    m = Model(name, shape["params"], shape["flops"], like.state_per_param, like.sgemm, like.eta, like.u)
    return m, shape["world"], shape["batch"] / shape["world"], t


def after_boot(m, link, n, per_worker):
    """Recovery without boot and setup: formation, restore, the first step."""
    return formation(n) + m.restore(link, n) + m.step(link, n, per_worker)


boot = setup = None
cases = {k: recovery_case(k) for k in ("w1_n2", "w2_n2", "w2_n4", "cnn_n2")}
if cases["w1_n2"] and cases["w2_n2"]:
    (m1, n1, b1, t1), (m2, n2, b2, t2) = cases["w1_n2"], cases["w2_n2"]
    r1, r2 = t1 - after_boot(m1, links["lo"], n1, b1), t2 - after_boot(m2, links["lo"], n2, b2)
    setup = (r2 - r1) / (m2.params - m1.params)
    boot = r1 - setup * m1.params
    for what, t in (("W1 recovery from peer memory, loopback, N=2", t1),
                    ("W2 recovery from peer memory, loopback, N=2", t2)):
        fitted.append((what, t, None, "s", "(with the other, defines boot and setup)"))


def recovery_at(m, link, n, per_worker):
    return boot + setup * m.params + after_boot(m, link, n, per_worker)


if boot is not None:
    for key, what in (("w2_n4", "W2 recovery from peer memory, loopback, N=4"),
                      ("cnn_n2", "CNN recovery from peer memory, loopback, N=2")):
        if cases[key]:
            m, n, b, t = cases[key]
            checks.append((what, t, recovery_at(m, links["lo"], n, b), "s"))


def fmt(v, unit):
    if unit == "ms":
        return f"{v * 1e3:,.2f} ms"
    if unit == "µs":
        return f"{v * 1e6:,.0f} µs"
    if unit == "s":
        return f"{v:.2f} s"
    return f"{v:,.0f}"


print("\n### Checked against the points the model was not fitted on\n")
print("| measurement | measured | predicted | error |")
print("| --- | --- | --- | --- |")
errors = []
for what, meas, pred, unit in checks:
    err = (pred - meas) / meas
    errors.append(abs(err))
    print(f"| {what} | {fmt(meas, unit)} | {fmt(pred, unit)} | {err * 100:+.0f}% |")
if errors:
    within = sum(e <= 0.20 for e in errors)
    print(f"\n{within} of {len(errors)} checks within 20%; median error {statistics.median(errors) * 100:.0f}%, "
          f"largest {max(errors) * 100:.0f}%.")

print("\n### The fit on its own points\n")
print("| measurement | measured | model |")
print("| --- | --- | --- |")
for what, meas, model, unit, note in fitted:
    got = note if model is None else f"{fmt(model, unit)} ({(model - meas) / meas * 100:+.0f}%)"
    print(f"| {what} | {fmt(meas, unit)} | {got} |")
if form:
    print(f"\nWorld formation (simulated workers): {', '.join(f'{n:,}: {t:.2f} s' for n, t in form)}; "
          f"line {form_line[0]:.3f} s + {form_line[1] * 1e6:.0f} µs per worker.")
if boot is not None:
    print(f"\nRecovery: boot {boot:.3f} s, setup {setup * 1e9:.1f} ns per parameter.")

# Predictions: one worker per host with its own core (s = 1), this CPU's
# per-message and per-byte costs (veth's), the link's wire rate at the
# efficiency iperf3 measured on the tbf link nearest it.
if veth is not None and models:
    eff_rate = next((r for r in RATES if r.endswith("gbit") and iperf_bps(r)), None)
    eff = iperf_bps(eff_rate) / (int(eff_rate[:-4]) * 1e9) if eff_rate else 0.95
    print(f"\n### Predicted: one worker per host, N = 8 .. 1,024\n")
    print(f"Weak scaling (each worker keeps its N=2 batch), one core per worker at {models['W2'].sgemm / 1e9:.0f} "
          f"GFLOP/s sgemm, a0 + a1 = {us(veth.a0 + veth.a1)} µs and b = {veth.b * 1e9:.3f} ns per byte (veth's, fitted), links at "
          f"{eff * 100:.0f}% of line rate (iperf3 on the {eff_rate} tbf link). Efficiency: samples/s over N times "
          "one worker's without communication. Recovery: a worker restarted in place, from peer memory; "
          "a lost host adds the heartbeat deadline.\n")
    per_worker = {"W2": 128, "CNN": 64}
    predictions = []
    for gbit in (10, 25):
        L = Link(veth.a0, veth.a1, veth.b, 8.0 / (gbit * 1e9 * eff), veth.a2, veth.c2)  # a host per worker
        for name, m in models.items():
            b = per_worker[name]
            alone = m.compute(L, 1, b) + m.u * m.params
            print(f"{name} at {gbit} Gbit/s:\n")
            print("| N | step ms | compute / reduce-scatter / optimizer / all-gather ms | samples/s | efficiency | recovery s |")
            print("| --- | --- | --- | --- | --- | --- |")
            for n in (8, 16, 32, 64, 128, 256, 512, 1024):
                c, rs, o, ag = m.phases(L, n, b)
                step = c + rs + o + ag
                rec = recovery_at(m, L, n, b) if boot is not None else float("nan")
                predictions.append({"model": name, "gbit": gbit, "workers": n, "step_s": step,
                                    "samples_per_second": n * b / step, "efficiency": alone / step,
                                    "recovery_s": rec})
                print(f"| {n:,} | {ms(step)} | {ms(c)} / {ms(rs)} / {ms(o)} / {ms(ag)} | {n * b / step:,.0f} | "
                      f"{alone / step * 100:.0f}% | {rec:.2f} |")
            print()

if JSON_OUT:
    with open(JSON_OUT, "w") as f:
        json.dump({
            "links": {k: {"a0": v.a0, "a1": v.a1, "b": v.b, "w": v.w, "a2": v.a2, "c2": v.c2, "burst": v.burst}
                      for k, v in links.items() if v is not None},
            "models": {k: {"eta": m.eta, "u": m.u} for k, m in models.items()},
            "recovery": {"boot": boot, "setup": setup, "formation": list(form_line)},
            "checks": [{"what": w, "measured": me, "predicted": p} for w, me, p, _ in checks],
            "predictions": predictions if veth is not None and models else [],
        }, f, indent=1)
