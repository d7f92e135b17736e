#!/usr/bin/env bash
# A real Prometheus (Debian's 2.42) scrapes a running 2-worker job through
# file-based service discovery built from the job's own addresses, and its
# HTTP API shows the coordinator's and every worker's series, moving: step,
# loss, samples/s, phase times, checkpoint commits, generations.
# Everything started here is stopped by PID.
#   prometheus_test.sh SOURCE_DIR BIN_DIR
# Exit 77 (skipped) without the prometheus binary.
set -uo pipefail
src=$1 bin=$2
fail() { echo "FAILED: $*"; exit 1; }
command -v prometheus > /dev/null || { echo "SKIPPED: prometheus is not installed (apt-get install prometheus)"; exit 77; }
T=$(mktemp -d /tmp/shardline-prometheus-XXXXXX)
launch_pid= prom_pid=
cleanup() {
  [ -n "$prom_pid" ] && kill "$prom_pid" 2>/dev/null
  if [ -n "$launch_pid" ]; then
    kill -TERM "$launch_pid" 2>/dev/null
    for _ in $(seq 600); do kill -0 "$launch_pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$launch_pid" 2>/dev/null
  fi
  [ -n "$prom_pid" ] && wait "$prom_pid" 2>/dev/null
  rm -rf "$T"
}
trap cleanup EXIT

"$bin/shardline" launch --config "$src/deploy/configs/fmnist_mlp.textproto" --workers 2 --workdir "$T/run" \
  --set train.total_steps=100000000 --set checkpoint.every_steps=500 --set train.log_every=100 > "$T/launch.log" 2>&1 &
launch_pid=$!
ports=()
for _ in $(seq 600); do
  ports=()
  [ -s "$T/run/coordinator.metrics_address" ] && ports+=("$(cut -d: -f2 "$T/run/coordinator.metrics_address")")
  for r in 0 1; do
    p=$(grep -o "metrics on port [0-9]*" "$T/run/logs/worker-$r.log" 2>/dev/null | head -1 | grep -o "[0-9]*$")
    [ -n "$p" ] && ports+=("$p")
  done
  [ ${#ports[@]} = 3 ] && break
  sleep 0.1
done
[ ${#ports[@]} = 3 ] || fail "the job's metrics ports did not appear: $(tail -20 "$T/launch.log")"

# File-based service discovery from the job's addresses.
cat > "$T/targets.json" <<JSON
[{"targets": ["127.0.0.1:${ports[0]}"], "labels": {"role": "coordinator"}},
 {"targets": ["127.0.0.1:${ports[1]}"], "labels": {"role": "worker", "rank": "0"}},
 {"targets": ["127.0.0.1:${ports[2]}"], "labels": {"role": "worker", "rank": "1"}}]
JSON
cat > "$T/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: ["$src/deploy/prometheus/rules.yml"]
scrape_configs:
  - job_name: shardline
    file_sd_configs:
      - files: ["$T/targets.json"]
        refresh_interval: 1s
YML
# Outside the ephemeral range: a port from bind(":0") can be handed to an
# outgoing connection (a scrape, say) before Prometheus binds it.
web=$("$bin/shardline" port) || fail "shardline port: no free port"
prometheus --config.file="$T/prometheus.yml" --storage.tsdb.path="$T/data" --web.listen-address="127.0.0.1:$web" \
  > "$T/prometheus.log" 2>&1 &
prom_pid=$!

# query EXPR -> the number of series and their values, "n v1 v2 ..."
query() {
  python3 - "$web" "$1" <<'PY'
import json, sys, urllib.parse, urllib.request
port, expr = sys.argv[1], sys.argv[2]
try:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr}), timeout=5) as r:
        res = json.load(r)["data"]["result"]
except Exception as e:
    print("0"); sys.exit(0)
print(len(res), *[float(x["value"][1]) for x in res])
PY
}
# wait_for EXPR TEST: polls (60 s) until python's TEST(n, values) holds.
wait_for() {
  local got
  for _ in $(seq 120); do
    got=$(query "$1")
    python3 -c "import sys; a=sys.argv[1].split(); n=int(a[0]); v=[float(x) for x in a[1:]]; sys.exit(0 if ($2) else 1)" "$got" && return 0
    sleep 0.5
  done
  fail "$1: got '$got', wanted $2 ($(tail -3 "$T/prometheus.log"))"
}

wait_for 'up{job="shardline"}' 'n == 3 and all(x == 1 for x in v)'
wait_for 'shardline_global_step' 'n == 1 and v[0] > 0'
wait_for 'shardline_step{role="worker"}' 'n == 2 and all(x > 0 for x in v)'
wait_for 'shardline_loss{role="worker"}' 'n == 2 and all(0 < x < 10 for x in v)'
wait_for 'shardline_samples_per_second{role="worker"}' 'n == 2 and all(x > 0 for x in v)'
wait_for 'sum by (phase) (rate(shardline_phase_seconds_total[5s]))' 'n == 4 and all(x > 0 for x in v)'
wait_for 'shardline_last_checkpoint_step' 'n == 1 and v[0] >= 500'
wait_for 'shardline_generation' 'n == 1 and v[0] >= 1'
wait_for 'shardline_worker_generation' 'n == 2 and all(x >= 1 for x in v)'
# Moving: the step Prometheus stored rises over a few seconds.
wait_for 'delta(shardline_global_step[5s])' 'n == 1 and v[0] > 0'
# Goodput: productive time grows, every badput kind is there, startup was paid.
wait_for 'delta(shardline_goodput_seconds_total[5s])' 'n == 1 and v[0] > 0'
wait_for 'shardline_badput_seconds_total' 'n == 7'
wait_for 'shardline_badput_seconds_total{kind="startup"}' 'n == 1 and v[0] > 0'
wait_for 'shardline_goodput_ratio' 'n == 1 and 0 < v[0] < 1'
# The recording rules of deploy/prometheus/rules.yml, evaluated on the job.
wait_for 'job:shardline_goodput_ratio:lifetime' 'n == 1 and 0 < v[0] < 1'
wait_for 'job:shardline_samples_per_second:avg' 'n == 1 and v[0] > 0'
# Stragglers: a score per rank, the fastest at 1.
wait_for 'shardline_straggler_score' 'n == 2 and all(0 < x <= 1 for x in v) and max(v) == 1'
wait_for 'shardline_rank_busy_seconds_per_step' 'n == 2 and all(x > 0 for x in v)'
# Every metric the rules, the dashboard and docs/operations.md name is one
# this job exports (and the docs list every one), and every dashboard
# expression returns data from it.
python3 "$src/tests/observability/check_metric_names.py" "$web" "$src/deploy/prometheus/rules.yml" \
  "$src/deploy/grafana/shardline.json" --documented "$src/docs/operations.md" \
  || fail "deploy/ or docs/ name metrics the job does not export, or docs/ misses one"
python3 "$src/tests/observability/grafana_check.py" "$src/deploy/grafana/shardline.json" --prometheus "$web" \
  || fail "the dashboard's expressions on a live job"
# ... and the check can fail: a name no process exports is caught.
printf 'groups:\n- name: x\n  rules:\n  - record: x\n    expr: shardline_no_such_metric_total\n' > "$T/bogus.yml"
python3 "$src/tests/observability/check_metric_names.py" "$web" "$T/bogus.yml" > /dev/null \
  && fail "the metric-name check passed a metric no process exports"
echo PASSED
