#!/usr/bin/env bash
# The live status page and `shardline status` against a running 2-worker job:
# Debian's headless Chromium loads http://<coordinator metrics>/status, and its
# DOM must show a row per worker and both curves with points; screenshots
# (desktop and phone width) are kept as test artifacts. `shardline status`
# answers with both workers (text and JSON) and refuses a wrong token.
# Everything started here is stopped by PID.
#   status_page_test.sh SOURCE_DIR BIN_DIR ARTIFACT_DIR
# Exit 77 (skipped) without chromium.
set -uo pipefail
src=$1 bin=$2 art=$3
fail() { echo "FAILED: $*"; exit 1; }
command -v chromium > /dev/null || { echo "SKIPPED: chromium is not installed (apt-get install chromium)"; exit 77; }
mkdir -p "$art"
T=$(mktemp -d /tmp/shardline-statuspage-XXXXXX)
launch_pid=
cleanup() {
  if [ -n "$launch_pid" ]; then
    kill -TERM "$launch_pid" 2>/dev/null
    for _ in $(seq 600); do kill -0 "$launch_pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$launch_pid" 2>/dev/null
  fi
  rm -rf "$T"
}
trap cleanup EXIT

"$bin/shardline" launch --config "$src/deploy/configs/fmnist_mlp.textproto" --workers 2 --workdir "$T/run" \
  --set train.total_steps=100000000 --set train.eval_every=300 --set train.log_every=50 > "$T/launch.log" 2>&1 &
launch_pid=$!
evals() { cat "$T/run/metrics.jsonl" 2>/dev/null | grep -c '"split":"eval"'; }
for _ in $(seq 900); do
  [ "$(evals)" -ge 3 ] && break
  kill -0 "$launch_pid" 2>/dev/null || fail "the job ended early: $(tail -20 "$T/launch.log")"
  sleep 0.1
done
[ "$(evals)" -ge 3 ] || fail "no eval lines after 90 s"
url="http://$(cat "$T/run/coordinator.metrics_address")/status"

# `shardline status`: text, JSON, and a refused token.
"$bin/shardline" status --workdir "$T/run" > "$T/status.txt" || fail "shardline status failed: $(cat "$T/status.txt")"
cat "$T/status.txt"
grep -q "running  generation 1" "$T/status.txt" || fail "status does not say the job is running"
[ "$(grep -cE '^ +[01]  127\.0\.0\.1:[0-9]+ +yes' "$T/status.txt")" = 2 ] || fail "status does not list both live workers"
"$bin/shardline" status --workdir "$T/run" --json > "$T/status.json" || fail "shardline status --json failed"
python3 - "$T/status.json" <<'PY' || fail "status --json is not the job's status"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["state"] == "RUNNING", s["state"]
assert [w["rank"] for w in s["workers"]] == [0, 1], s["workers"]
assert all(0 < w["straggler_score"] <= 1 for w in s["workers"]), s["workers"]
assert s["best_eval"]["accuracy"] > 0.5, s["best_eval"]
assert "badput_seconds" in s["goodput"]
PY
SHARDLINE_TOKEN=0000 "$bin/shardline" status --coordinator "$(cat "$T/run/coordinator.address")" > /dev/null 2>&1 \
  && fail "shardline status succeeded with a wrong token"

# The page in a real browser.
chrome() {
  timeout 60 chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync --user-data-dir="$T/chrome" "$@" \
    2> "$T/chromium.log"
}
chrome --dump-dom "$url" > "$T/dom.html" || fail "chromium could not load $url: $(tail -5 "$T/chromium.log")"
python3 - "$T/dom.html" <<'PY' || fail "the page's DOM lacks what it must show"
import sys
from html.parser import HTMLParser

class Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.rows, self.series, self.points, self.state = [], None, {}, None
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "tr" and "worker" in a.get("class", "").split():
            self.rows.append(a["data-rank"])
        if tag == "svg" and "chart" in a.get("class", "").split():
            self.series = a["data-series"]
        if tag == "polyline" and self.series:
            self.points[self.series] = len(a["points"].split())
        if tag == "span" and a.get("id") == "state":
            self.state = a.get("class")
    def handle_endtag(self, tag):
        if tag == "svg":
            self.series = None

p = Page()
p.feed(open(sys.argv[1]).read())
assert p.rows == ["0", "1"], f"worker rows {p.rows}"
assert p.points.get("train-loss", 0) >= 2, f"train-loss points {p.points}"
assert p.points.get("eval-accuracy", 0) >= 2, f"eval-accuracy points {p.points}"
assert p.state == "state running", p.state
print(f"DOM: worker rows {p.rows}, curve points {p.points}")
PY
chrome --screenshot="$art/status_page.png" --window-size=1200,1300 --hide-scrollbars "$url" \
  || fail "no screenshot: $(tail -5 "$T/chromium.log")"
chrome --screenshot="$art/status_page_phone.png" --window-size=390,1500 --hide-scrollbars "$url" \
  || fail "no phone-width screenshot"
[ -s "$art/status_page.png" ] && [ -s "$art/status_page_phone.png" ] || fail "empty screenshots"
echo "screenshots: $art/status_page.png $art/status_page_phone.png"
echo PASSED
