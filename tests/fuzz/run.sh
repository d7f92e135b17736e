#!/usr/bin/env bash
# Runs every libFuzzer target for SECONDS each, starting from its seed corpus
# (tests/fuzz/corpus/<name>/), after replaying its regression inputs
# (tests/fuzz/regressions/<name>/: inputs that once crashed it). Exits
# nonzero on the first crash, leak or timeout, leaving the input in WORK.
#   tests/fuzz/run.sh BUILD_DIR [SECONDS]
set -euo pipefail
build="${1:?usage: tests/fuzz/run.sh BUILD_DIR [SECONDS]}"
seconds="${2:-20}"
here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d /tmp/shardline-fuzz.XXXXXX)"
trap 'rm -rf "$work" /tmp/shardline_*_fuzz_*' EXIT
for fuzzer in "$build"/tests/fuzz/*_fuzz; do
  name="$(basename "$fuzzer")"
  mkdir -p "$work/$name"
  if compgen -G "$here/regressions/$name/*" > /dev/null; then
    "$fuzzer" -runs=0 "$here/regressions/$name"/* > "$work/$name.log" 2>&1 || {
      echo "$name: a regression input fails again"; tail -40 "$work/$name.log"; exit 1; }
  fi
  echo "fuzzing $name for ${seconds}s"
  if ! "$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$work/$name-" "$work/$name" "$here/corpus/$name" > "$work/$name.log" 2>&1; then
    echo "$name: crashed"; tail -60 "$work/$name.log"; trap - EXIT; exit 1
  fi
  grep -aE "stat::number_of_executed_units|stat::new_units_added" "$work/$name.log" | tr '\n' ' '; echo
done
