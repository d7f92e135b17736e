#!/usr/bin/env bash
# Installs everything shardline needs to build, test and train, from Debian 12
# packages. Idempotent; run as root (or with sudo available).
set -euo pipefail
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
PACKAGES=(
  cmake g++ make pkg-config ccache
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libopenblas-dev librocksdb-dev prometheus-cpp-dev zlib1g-dev
  nlohmann-json3-dev libssl-dev openssl libgtest-dev libgmock-dev libbenchmark-dev
  clang-14 libfuzzer-14-dev
  iproute2 systemd slurmctld slurmd slurm-client munge python3 python3-yaml prometheus chromium gnuplot-nox
  dataset-fashion-mnist
)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
