#!/usr/bin/env bash
# Installs what shardline needs from Debian 12 packages. Idempotent; run as
# root (or with sudo available).
#
#   deploy/install-deps.sh          to build shardline and train: the
#                                   compiler, the libraries, Fashion-MNIST
#   deploy/install-deps.sh --test   and everything the tests and benches use:
#                                   GoogleTest, Google Benchmark, clang and
#                                   libFuzzer, Slurm, Prometheus, Chromium,
#                                   gnuplot, network namespaces, Python
set -euo pipefail
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
PACKAGES=(
  cmake g++ make pkg-config ccache
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libopenblas-dev librocksdb-dev prometheus-cpp-dev zlib1g-dev
  nlohmann-json3-dev libssl-dev openssl libdnnl-dev libsentencepiece-dev
  dataset-fashion-mnist
)
TEST_PACKAGES=(
  libgtest-dev libgmock-dev libbenchmark-dev
  clang-14 libfuzzer-14-dev
  iproute2 systemd slurmctld slurmd slurm-client munge python3 python3-yaml prometheus chromium gnuplot-nox
)
case "${1:-}" in
  "") ;;
  --test) PACKAGES+=("${TEST_PACKAGES[@]}") ;;
  *) echo "usage: $0 [--test]" >&2; exit 2 ;;
esac
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
# Jane Austen's novels for the language models (shardline data austen):
# Debian's r-cran-janeaustenr depends on R, which shardline does not need, so
# its files are unpacked to /opt/shardline/janeaustenr instead of installed.
AUSTEN_RDB=usr/lib/R/site-library/janeaustenr/data/Rdata.rdb
if [ ! -f "/$AUSTEN_RDB" ] && [ ! -f "/opt/shardline/janeaustenr/$AUSTEN_RDB" ]; then
  tmp="$(mktemp -d)"
  chmod 755 "$tmp"  # apt's sandbox user writes the download here
  if ! (cd "$tmp" && apt-get download -q r-cran-janeaustenr); then
    $SUDO apt-get update -q
    (cd "$tmp" && apt-get download -q r-cran-janeaustenr)
  fi
  $SUDO mkdir -p /opt/shardline/janeaustenr
  $SUDO dpkg-deb -x "$tmp"/r-cran-janeaustenr_*.deb /opt/shardline/janeaustenr
  rm -rf "$tmp"
fi
