#!/usr/bin/env bash
# deploy/Dockerfile cannot be built here (no base images), so check what can
# be checked offline:
#   - every package its build stage installs is one deploy/install-deps.sh
#     installs (the same toolchain as every other build);
#   - every shared library the built binaries link comes from a package its
#     runtime stage installs (ldd + dpkg -S on the real binaries);
#   - every binary it copies is one the build makes, and the configs exist.
#   dockerfile_check.sh SOURCE_DIR BIN_DIR
set -euo pipefail
src=$1 bin=$2
df=$src/deploy/Dockerfile
fail() { echo "FAILED: $*"; exit 1; }
# The package words of each stage's apt-get install (continuation lines included).
stage_packages() {  # stage number (1 build, 2 runtime)
  awk -v want="$1" '
    /^FROM / { stage++ }
    stage == want && /apt-get install/ { on = 1; sub(/.*--no-install-recommends/, "") }
    on { line = $0; sub(/&&.*/, "", line); gsub(/\\/, "", line); printf "%s ", line; if ($0 ~ /&&/ || $0 !~ /\\$/) on = 0 }
  ' "$df" | tr -s ' ' '\n' | grep -v '^$' | sort -u
}
build_pkgs=$(stage_packages 1)
run_pkgs=$(stage_packages 2)
[ -n "$build_pkgs" ] && [ -n "$run_pkgs" ] || fail "no apt-get install found in both stages of $df"
deps=$(sed -n '/^PACKAGES=(/,/^)/p' "$src/deploy/install-deps.sh" | tr -s ' ()' '\n' | grep -v -e '^$' -e 'PACKAGES=' | sort -u)
for p in $build_pkgs; do
  grep -qx "$p" <<< "$deps" || fail "the build stage installs $p, which deploy/install-deps.sh does not"
done
libs=()
for b in shardline shardline-coordinator shardline-worker shardline-spm; do
  [ -x "$bin/$b" ] || fail "$bin/$b was not built"
  grep -q "/build/bin/$b" "$df" || fail "$df does not copy $b"
  libs+=($(ldd "$bin/$b" | awk '/=>/ {print $3}'))
done
for lib in $(printf '%s\n' "${libs[@]}" | sort -u); do
  pkg=$(dpkg -S "$(readlink -f "$lib")" 2>/dev/null | head -1 | cut -d: -f1) || true
  [ -n "$pkg" ] || pkg=$(dpkg -S "$lib" 2>/dev/null | head -1 | cut -d: -f1) || true
  [ -n "$pkg" ] || fail "$lib (linked by the binaries) belongs to no package"
  case "$pkg" in libc6|libgcc-s1) continue ;; esac  # in every Debian image
  grep -qx "$pkg" <<< "$run_pkgs" || fail "the binaries link $lib from $pkg, which the runtime stage does not install"
done
grep -qx dataset-fashion-mnist <<< "$run_pkgs" || fail "the runtime stage has no data set"
[ -d "$src/deploy/configs" ] || fail "deploy/configs is missing"
grep -q '^USER shardline' "$df" || fail "the image does not run as the non-root user"
echo PASSED
