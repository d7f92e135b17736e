#!/usr/bin/env bash
# One short 2-worker job with train.trace_steps, then everything written from
# its curves and traces, each checked by a reader that is not the writer:
#   - TensorBoard event files and metrics.csv, decoded by tensorboard_check.py
#     (its own CRC32C and protobuf decoding) against metrics.jsonl;
#   - `shardline trace merge`: valid JSON, every traced step on every rank,
#     phases nested in their step and in order, the ranks aligned, and a
#     coordinator track;
#   - `shardline plot`: a PNG of the right size (when gnuplot is installed).
#   curves_and_traces_test.sh SOURCE_DIR BIN_DIR ARTIFACT_DIR
set -uo pipefail
src=$1 bin=$2 art=$3
fail() { echo "FAILED: $*"; exit 1; }
mkdir -p "$art"
T=$(mktemp -d /tmp/shardline-curves-XXXXXX)
trap 'rm -rf "$T"' EXIT

timeout 300 "$bin/shardline" launch --config "$src/deploy/configs/fmnist_mlp.textproto" --workers 2 --workdir "$T/run" \
  --set train.total_steps=700 --set train.eval_every=200 --set train.log_every=50 \
  --set "train.trace_steps=[1,150,151,500]" --set checkpoint.every_steps=500 \
  --set collective.bucket_cap_mb=0.1 > "$T/launch.log" 2>&1 \
  || fail "the job failed: $(tail -20 "$T/launch.log")"

python3 "$src/tests/observability/tensorboard_check.py" "$T/run" --self-test || fail "TensorBoard / metrics.csv"

"$bin/shardline" trace merge "$T/run" --out "$art/trace.json" || fail "trace merge"
python3 - "$art/trace.json" <<'PY' || fail "the merged trace"
import json, sys
doc = json.load(open(sys.argv[1]))
events = doc["traceEvents"]
names = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "process_name"}
assert names == {0: "coordinator", 1: "rank 0", 2: "rank 1"}, names
coord = [e for e in events if e["pid"] == 0 and e.get("ph") in ("X", "i")]
assert any(e["name"] == "world formed" for e in coord), coord
assert any(e["name"] == "checkpoint committed" and e["args"]["step"] == 500 for e in coord), coord
# With collective.overlap (the default) and more than one bucket (a 0.1 MiB
# cap cuts W1 into three) the all-gathers run in the background: a step's
# all_gather spans are its forward's waits for the last step's gathers
# (none in the first step).
TOP = ["compute", "reduce_scatter", "optimizer"]
CHILDREN = {"compute": ["data", "forward", "backward"], "optimizer": ["clip", "wait_peers", "update"]}
ends = {}
for step in (1, 150, 151, 500):
    for pid in (1, 2):
        spans = [e for e in events if e["pid"] == pid and e.get("ph") == "X" and e["args"]["step"] == step]
        by = {}
        for e in spans:
            by.setdefault(e["name"], []).append(e)
        assert len(by.get("step", [])) == 1, f"rank {pid-1} step {step}: {sorted(by)}"
        s = by["step"][0]
        inside = lambda e, p: p["ts"] <= e["ts"] and e["ts"] + e["dur"] <= p["ts"] + p["dur"]
        for e in spans:
            assert inside(e, s), f"rank {pid-1} step {step}: {e['name']} outside its step"
        last = s["ts"]
        for name in TOP:
            assert len(by.get(name, [])) == 1, f"rank {pid-1} step {step}: {name} missing"
            top = by[name][0]
            assert top["ts"] >= last, f"rank {pid-1} step {step}: {name} starts before the phase before it ends"
            last = top["ts"] + top["dur"]
            for child in CHILDREN.get(name, []):
                assert by.get(child), f"rank {pid-1} step {step}: {child} missing"
                for c in by[child]:
                    assert inside(c, top), f"rank {pid-1} step {step}: {child} outside {name}"
        gathers = by.get("all_gather", [])
        assert bool(gathers) == (step != 1), f"rank {pid-1} step {step}: {len(gathers)} all_gather spans"
        # An audited step (every 50th: audit.every_steps) waits for the last
        # step's gathers before its replay audit, inside the "audit" span.
        for g in gathers:
            assert any(inside(g, f) for f in by["forward"] + by.get("audit", [])), \
                f"rank {pid-1} step {step}: all_gather outside forward and audit"
        assert bool(by.get("audit")) == (step % 50 == 0), f"rank {pid-1} step {step}: audit spans {by.get('audit')}"
        ends.setdefault(step, []).append(s["ts"] + s["dur"])
# One clock: a synchronous step ends within a few ms on every rank (each
# step's scalar all-reduce waits for the other rank).
for step, e in ends.items():
    assert max(e) - min(e) < 20000, f"step {step} ends {max(e) - min(e)} us apart across ranks"
print(f"trace: {len(events)} events, steps {sorted(ends)} on both ranks, nested and ordered, aligned")
PY

if command -v gnuplot > /dev/null; then
  "$bin/shardline" plot "$T/run" --out "$art/curves.png" || fail "plot"
  python3 - "$art/curves.png" <<'PY' || fail "curves.png is not a 1200x800 PNG"
import struct, sys
b = open(sys.argv[1], "rb").read()
assert b[:8] == b"\x89PNG\r\n\x1a\n"
w, h = struct.unpack(">II", b[16:24])
assert (w, h) == (1200, 800), (w, h)
PY
else
  echo "gnuplot not installed: plot not checked"
fi
# Bad input: a workdir without traces is named in the error.
"$bin/shardline" trace merge "$T/nowhere" --out "$T/x.json" 2> "$T/err" && fail "trace merge of nothing succeeded"
grep -q "$T/nowhere/traces" "$T/err" || fail "the error does not name the traces directory: $(cat "$T/err")"
echo PASSED
