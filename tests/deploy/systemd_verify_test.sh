#!/usr/bin/env bash
# deploy/systemd units pass `systemd-analyze verify` with no complaint at
# all (it only warns, exit 0, about many mistakes, so any output fails),
# with ExecStart pointed at the binaries just built. A deliberately broken
# copy must fail, or this test could not.
#   systemd_verify_test.sh SOURCE_DIR BIN_DIR
set -euo pipefail
src=$1 bin=$2
command -v systemd-analyze > /dev/null || { echo "SKIPPED: systemd-analyze is not installed"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

verify() {  # dir -> 0 if clean
  local out
  out=$(cd "$1" && systemd-analyze verify ./shardline-coordinator.service ./shardline-worker@0.service 2>&1) || {
    echo "$out"; return 1; }
  [ -z "$out" ] || { echo "$out"; return 1; }
}

mkdir "$tmp/good" "$tmp/bad"
for unit in shardline-coordinator.service shardline-worker@.service; do
  sed "s#/usr/local/bin#$bin#g" "$src/deploy/systemd/$unit" > "$tmp/good/$unit"
  sed "s#/usr/local/bin#$bin#g; s/^Restart=on-failure/Restart=sometimes/" "$src/deploy/systemd/$unit" > "$tmp/bad/$unit"
done
ln -s shardline-worker@.service "$tmp/good/shardline-worker@0.service"
ln -s shardline-worker@.service "$tmp/bad/shardline-worker@0.service"

verify "$tmp/good" || { echo "FAILED: deploy/systemd does not verify cleanly"; exit 1; }
if verify "$tmp/bad" > /dev/null; then echo "FAILED: a broken unit verified cleanly: the check cannot fail"; exit 1; fi
# Every variable the units read is set in the shipped environment file.
for var in $(grep -oh '\$[{]\?SHARDLINE_[A-Z_]*' "$src"/deploy/systemd/*.service | tr -d '${' | sort -u); do
  grep -q "^$var=" "$src/deploy/systemd/shardline.env" || { echo "FAILED: $var is not set in shardline.env"; exit 1; }
done
echo PASSED
