#!/usr/bin/env bash
# Issue 18: measures what the calibrated scaling model (bench/lib/scaling_model.py,
# docs/scaling.md) is fitted to and checked against, then runs the model.
#
#  1. Loopback (this namespace): W2 and the CNN trained STEPS steps with
#     `shardline launch` at N of WORLDS, collective.overlap=false (the
#     model's step is the phases one after the other).
#  2. Simulated hosts (bench/lib/sim_hosts.sh: a namespace per process, veth
#     to a bridge), for each link of RATES (tc tbf; "none": unshaped):
#     iperf3, then the same training runs between hosts.
#     Then the collectives, REPEATS rounds, each round over every link
#     (loopback, then each of RATES): the ring all-reduce
#     (--doubling_max_bytes 0) at N of WORLDS over SIZES and the scalar
#     all-reduce (recursive doubling) at N of SCALAR_WORLDS, ITERS
#     iterations a ring run and SCALAR_ITERS a scalar one (a scalar
#     all-reduce takes 0.1-2 ms: a median of 10 is mostly noise). Rounds
#     rather than repeats in a row, so that a slow minute on this shared
#     machine lands on every link alike; the model takes each point's
#     median over the rounds.
#  3. Recovery: KILLS SIGKILLs of worker 1 under `shardline launch
#     --max_restarts`, restored from peer memory: W1, W2 and the CNN at N=2,
#     W2 at N=4 (bench/drivers/recovery_bench.sh).
#  4. World formation at FORM_WORLDS simulated workers
#     (bench/drivers/control_plane_bench.sh).
#  5. bench/lib/scaling_model.py OUT: the fit, the check on the points not
#     fitted, and the predictions for N = 8 .. 1,024 at 10 and 25 Gbit/s,
#     as markdown in OUT/model.md.
#
#   bench/drivers/scaling_bench.sh                  # about 5 minutes; root (namespaces)
#   MEASURE=0 bench/drivers/scaling_bench.sh        # refit from OUT's measurements
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-bench/out/scaling}
MEASURE=${MEASURE:-1}
RATES=${RATES:-"none 10gbit 2500mbit"}
WORLDS=${WORLDS:-"2 4"}
SCALAR_WORLDS=${SCALAR_WORLDS:-"2 4 8"}
SIZES=${SIZES:-4096,65536,1048576,4194304,16777216,33554432}
ITERS=${ITERS:-10}
REPEATS=${REPEATS:-3}
SCALAR_ITERS=${SCALAR_ITERS:-200}
STEPS=${STEPS:-100}
KILLS=${KILLS:-3}
FORM_WORLDS=${FORM_WORLDS:-"256 1024 4096"}
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

if [ "$MEASURE" != 0 ]; then
  command -v iperf3 > /dev/null || need_iperf=1
  command -v bc > /dev/null || need_bc=1
  if [ -n "${need_iperf:-}${need_bc:-}" ]; then
    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q iperf3 bc
  fi
  ./deploy/install-deps.sh --test
  [ -x build/bin/shardline-allreduce-worker ] && [ -x build/bin/control_plane_load ] ||
    { cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build -j2; }
  rm -rf "$OUT" && mkdir -p "$OUT"
  getconf _NPROCESSORS_ONLN > "$OUT/cores"

  MLP=deploy/configs/fmnist_mlp.textproto
  CNN=deploy/configs/fmnist_cnn.textproto
  RUN="--set train.total_steps=$STEPS --set train.log_every=10 --set train.eval_every=0
       --set checkpoint.every_steps=0 --set checkpoint.save_final=false --set collective.overlap=false"
  W2="--set model.mlp.hidden_sizes=2048,2048 --set data.global_batch_size=256"

  # N ranks of shardline-allreduce-worker, ITERS iterations of each size;
  # rank r runs under the command PLACE r (empty: here) and listens on
  # HOST r. N OP SIZES ITERS PLACE HOST
  collective() {
    local n=$1 op=$2 sizes=$3 iters=$4 place=$5 host=$6 rdv r pids=()
    rdv=$(mktemp -d)
    for ((r = n - 1; r >= 0; r--)); do
      # shellcheck disable=SC2046
      timeout 600 $($place $r) build/bin/shardline-allreduce-worker --rank $r --world $n --rendezvous "$rdv" \
        --listen "$($host $r):0" --op "$op" --sizes "$sizes" --iters "$iters" --doubling_max_bytes 0 \
        > "$rdv/out-$r" 2> "$rdv/err-$r" &
      pids+=($!)
    done
    for r in "${pids[@]}"; do wait "$r" || { echo "collective $op N=$n failed: $(cat "$rdv"/err-*)" >&2; }; done
    cat "$rdv/out-0"
    rm -rf "$rdv"
  }
  here() { :; }
  loopback() { echo 127.0.0.1; }
  on_host() { echo "ip netns exec $(sim_ns $(($1 + 1)))"; }
  host_addr() { sim_addr $(($1 + 1)); }

  # The ring and scalar all-reduces on one link, appended to DIR. PLACE HOST DIR
  collectives() {
    for n in $WORLDS; do collective $n allreduce "$SIZES" "$ITERS" "$1" "$2" >> "$3/ring.jsonl"; done
    for n in $SCALAR_WORLDS; do collective $n scalars 32 "$SCALAR_ITERS" "$1" "$2" >> "$3/scalars.jsonl"; done
  }

  mkdir -p "$OUT/lo"
  for n in $WORLDS; do
    echo "== loopback: W2 and CNN, N=$n" >&2
    # shellcheck disable=SC2086
    timeout 600 build/bin/shardline launch --config $MLP --workers $n --workdir "$OUT/lo/w2_n$n" $RUN $W2 \
      2> "$OUT/lo/w2_n$n.log" || echo "W2 N=$n on loopback failed (see $OUT/lo/w2_n$n.log)" >&2
    # shellcheck disable=SC2086
    timeout 600 build/bin/shardline launch --config $CNN --workers $n --workdir "$OUT/lo/cnn_n$n" $RUN \
      2> "$OUT/lo/cnn_n$n.log" || echo "CNN N=$n on loopback failed (see $OUT/lo/cnn_n$n.log)" >&2
  done

  max=3
  for n in $WORLDS $SCALAR_WORLDS; do ((n + 1 > max)) && max=$((n + 1)); done
  SIM_PREFIX=slsc
  source bench/lib/sim_hosts.sh
  sim_hosts_up $max
  for rate in $RATES; do
    d="$OUT/$rate"
    mkdir -p "$d"
    sim_shape "$rate"
    echo "== $rate: iperf3" >&2
    sim_iperf "$d/iperf.json"
    for n in $WORLDS; do
      echo "== $rate: W2 and CNN, N=$n" >&2
      # shellcheck disable=SC2086
      sim_run_shardline "$d/w2_n$n" $n $MLP $RUN $W2 || echo "W2 N=$n on $rate failed (see $d/w2_n$n)" >&2
      # shellcheck disable=SC2086
      sim_run_shardline "$d/cnn_n$n" $n $CNN $RUN || echo "CNN N=$n on $rate failed (see $d/cnn_n$n)" >&2
    done
  done
  for ((round = 1; round <= REPEATS; round++)); do
    echo "== collectives, round $round of $REPEATS: loopback $RATES" >&2
    collectives here loopback "$OUT/lo"
    for rate in $RATES; do
      sim_shape "$rate"
      collectives on_host host_addr "$OUT/$rate"
    done
  done
  sim_hosts_down
  trap - EXIT

  echo "== recovery from peer memory: W1, W2 and the CNN" >&2
  recovery() {  # NAME WORKERS CONFIG SETS
    OUT="$OUT/recovery_$1" WORKERS=$2 CONFIG=$3 SETS="$4 --set checkpoint.memory_every_steps=5" KILLS=$KILLS \
      TORCHRUN=0 SHARDLINE_MODES=memory bench/drivers/recovery_bench.sh > /dev/null
  }
  recovery w1_n2 2 $MLP ""
  recovery w2_n2 2 $MLP "$W2"
  recovery w2_n4 4 $MLP "$W2"
  recovery cnn_n2 2 $CNN ""
  echo "== world formation" >&2
  OUT="$OUT/control_plane" WORLDS="$FORM_WORLDS" SILENCES=1 COMMANDS=1 STEADY=2 CHECKPOINTS=0 \
    bench/drivers/control_plane_bench.sh > /dev/null
fi

/usr/bin/python3 bench/lib/scaling_model.py "$OUT" "$RATES" | tee "$OUT/model.md"
