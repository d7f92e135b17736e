#!/usr/bin/env bash
# Issue 3 side by side: shardline's gRPC ring all-reduce against Gloo
# (Debian's python3-torch, gloo backend) and OpenMPI over TCP, N processes on
# loopback, same sizes, same timing rule (median over iterations of the
# slowest rank's time; busbw = algbw * 2(N-1)/N, as nccl-tests), plus iperf3's
# one-stream loopback TCP throughput, shardline's scalar all-reduce latency,
# and a yardstick: the same pipelined ring on bare TCP sockets with no
# framework (bench/peers/tcp_ring_allreduce.cc), i.e. what a ring over loopback TCP
# reaches on this machine.
#
#   bench/drivers/allreduce_vs_peers.sh                 # N = 2 4 8, 64 KiB .. 64 MiB
#   WORLDS="2 4" ITERS=10 bench/drivers/allreduce_vs_peers.sh
#   REPS=5 WORLDS="2 4" bench/drivers/allreduce_vs_peers.sh  # medians over 5 rounds
#
# With REPS > 1 every implementation (and iperf3) runs once per round, one
# after the other, and the tables report the median over the rounds: single
# runs on a shared 2-core machine move by 20% or more.
set -euo pipefail
cd "$(dirname "$0")/../.."
WORLDS=${WORLDS:-"2 4 8"}
SIZES=${SIZES:-65536,1048576,16777216,67108864}
ITERS=${ITERS:-20}
REPS=${REPS:-1}
OUT=bench/out/allreduce
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

need=()
/usr/bin/python3 -c "import torch" 2>/dev/null || need+=(python3-torch python3-numpy)
command -v mpicc >/dev/null || need+=(openmpi-bin libopenmpi-dev)
command -v iperf3 >/dev/null || need+=(iperf3)
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}"
fi
./deploy/install-deps.sh --test
if [ ! -x build/bin/shardline-allreduce-worker ]; then
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build -j2
fi
rm -rf "$OUT" && mkdir -p "$OUT"
mpicc -O2 -o "$OUT/mpi_allreduce" bench/peers/mpi_allreduce.c
g++ -O2 -std=c++17 -pthread -o "$OUT/tcp_ring_allreduce" bench/peers/tcp_ring_allreduce.cc

run_shardline() {  # N OP SIZES
  local n=$1 op=$2 sizes=$3 rdv
  rdv=$(mktemp -d)
  for ((r = 1; r < n; r++)); do
    build/bin/shardline-allreduce-worker --rank $r --world $n --rendezvous "$rdv" --op $op \
      --sizes $sizes --iters $ITERS 2>/dev/null &
  done
  build/bin/shardline-allreduce-worker --rank 0 --world $n --rendezvous "$rdv" --op $op \
    --sizes $sizes --iters $ITERS 2>/dev/null
  wait
  rm -rf "$rdv"
}

for ((rep = 1; rep <= REPS; rep++)); do
  echo "== round $rep of $REPS: iperf3, one stream on loopback" >&2
  iperf3 -s -1 -p 5599 >/dev/null 2>&1 &
  sleep 0.5
  iperf3 -c 127.0.0.1 -p 5599 -t 5 -J > "$OUT/iperf3-$rep.json"
  wait

  for n in $WORLDS; do
    echo "== N=$n shardline" >&2
    run_shardline $n allreduce $SIZES >> "$OUT/results.jsonl"
    run_shardline $n scalars 32 >> "$OUT/results.jsonl"
    echo "== N=$n gloo" >&2
    port=$((29500 + n))
    for ((r = 0; r < n; r++)); do
      MASTER_ADDR=127.0.0.1 MASTER_PORT=$port RANK=$r WORLD_SIZE=$n \
        /usr/bin/python3 bench/peers/gloo_allreduce.py --sizes $SIZES --iters $ITERS &
    done >> "$OUT/results.jsonl"
    wait
    echo "== N=$n bare tcp ring" >&2
    port=$((31000 + 16 * n))
    for ((r = 1; r < n; r++)); do
      "$OUT/tcp_ring_allreduce" $r $n $port $SIZES $ITERS &
    done
    "$OUT/tcp_ring_allreduce" 0 $n $port $SIZES $ITERS >> "$OUT/results.jsonl"
    wait
    echo "== N=$n openmpi tcp" >&2
    mpirun --allow-run-as-root --oversubscribe --mca pml ob1 --mca btl tcp,self \
      --mca btl_tcp_if_include lo -np $n "$OUT/mpi_allreduce" $SIZES $ITERS >> "$OUT/results.jsonl"
  done
done

/usr/bin/python3 bench/lib/summarize_allreduce.py "$OUT"
