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
  nlohmann-json3-dev libssl-dev openssl
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
