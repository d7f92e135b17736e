#!/usr/bin/env bash
# Issue 50: islands (DiLoCo) over slow links. Two simulated sites, one
# worker each (2 cores: islands of one worker), joined by links shaped with
# tc tbf to each rate of RATES (bench/lib/sim_hosts.sh: network namespaces
# on a bridge; this kernel has no netem, so no added delay: the links are
# slow, not far). The byte-level GPT (austen_gpt), the same STEPS, global
# batch and schedule for every run:
#   sync      collective.islands=1: every step's reduce-scatter and
#             all-gather cross the link
#   h<H>      collective.islands=2, an outer step every H steps (HS); an
#             item of HS may be H:LR:MOMENTUM[:WIRE] (outer_lr,
#             outer_momentum, diloco.wire), its run then h<H>_<LR>_<MOMENTUM>[_<WIRE>]
# For each: training seconds to TARGET bits per byte on the validation
# novel (the first evaluation at or below it), the final bits per byte,
# the bytes that crossed the link (eth0 of both sites, per 1,000 steps),
# and the curves in bench/diloco_loss.png. Root (namespaces); everything
# it creates it removes.
#
#   bench/drivers/diloco_bench.sh                                  # 1 Gbit/s, 100 and 20 Mbit/s
#   RATES=100mbit HS="10 50" STEPS=600 bench/drivers/diloco_bench.sh
#   RATES=100mbit HS="10:1:0 50:0.7:0.9:INT8" bench/drivers/diloco_bench.sh   # plain averaging; int8
#   RATES=20mbit HS="10:1:0 50" PNG=bench/diloco_loss_20mbit.png bench/drivers/diloco_bench.sh
#   RATES=100mbit HS="50 50:0.7:0.9:BF16 50:0.7:0.9:INT8" OUT=bench/out/diloco_wire PNG=bench/diloco_loss_wire.png ...   # wire formats
#   SETS="model.gpt.d_model=256 model.gpt.layers=6" OUT=bench/out/diloco_big ...   # a larger GPT
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-bench/out/diloco}
# shellcheck disable=SC2206
EXTRA=()
for s in ${SETS:-}; do EXTRA+=(--set "$s"); done  # every run's extra overrides
RATES=${RATES:-"1gbit 100mbit 20mbit"}
HS=${HS:-"10 50 200"}
STEPS=${STEPS:-1000}
TARGET=${TARGET:-2.2}
PNG=${PNG:-bench/diloco_loss.png}  # the curves of this run's RATES
EVAL=${EVAL:-100}  # evaluation every EVAL steps (every H for a larger H)
P=${PREFIX:-sldl}
export SIM_TIMEOUT=${SIM_TIMEOUT:-3600}  # synchronous training over 20 Mbit/s is slow
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

command -v iperf3 > /dev/null || { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q iperf3; }
command -v gnuplot > /dev/null || { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q gnuplot-nox; }
if [[ -z ${SKIP_BUILD:-} ]]; then
  ./deploy/install-deps.sh --test > /dev/null
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release > /dev/null
  cmake --build build -j2 --target shardline_cli shardline_worker_bin shardline_coordinator_bin > /dev/null
fi
mkdir -p "$OUT"
DATA=$OUT/data
[[ -f $DATA/train.txt ]] || build/bin/shardline data austen --out "$DATA" > /dev/null

SIM_PREFIX=$P
source bench/lib/sim_hosts.sh
sim_hosts_up 3

tx_bytes() {  # HOST: bytes its eth0 has sent
  ip -n "$(sim_ns "$1")" -s -j link show eth0 | /usr/bin/python3 -c \
    "import json,sys; print(json.load(sys.stdin)[0]['stats64']['tx']['bytes'])"
}

run_one() {  # RATE NAME SETS...: the job on hosts 1 and 2 (coordinator on 0); bytes across into NAME/link_bytes
  local rate=$1 name=$2 dir="$OUT/$1/$2" before after
  shift 2
  rm -rf "$dir"
  before=$(($(tx_bytes 1) + $(tx_bytes 2)))
  echo "== $rate $name" >&2
  sim_run_shardline "$dir" 2 deploy/configs/austen_gpt.textproto --set "data.text.train_path=$DATA/train.txt" \
    --set "data.text.val_path=$DATA/val.txt" --set "train.total_steps=$STEPS" --set train.log_every=10 \
    --set checkpoint.every_steps=0 --set checkpoint.save_final=false --set checkpoint.best_metric= \
    --set checkpoint.memory_every_steps=0 --set "schedule.warmup_steps=$((STEPS / 30))" ${EXTRA[@]+"${EXTRA[@]}"} "$@" ||
    echo "$rate $name: a process failed (see $dir)" >&2
  after=$(($(tx_bytes 1) + $(tx_bytes 2)))
  echo $((after - before)) > "$dir/link_bytes"
}

for rate in $RATES; do
  sim_shape "$rate"
  mkdir -p "$OUT/$rate"
  sim_iperf "$OUT/$rate/iperf.json"
  run_one "$rate" sync --set "train.eval_every=$EVAL"
  for item in $HS; do
    IFS=: read -r h lr mom wire <<< "$item"
    sets=(--set collective.islands=2 --set "collective.diloco.inner_steps=$h"
      --set "train.eval_every=$((h > EVAL ? h : (EVAL / h) * h))")
    [[ -n $lr ]] && sets+=(--set "collective.diloco.outer_lr=$lr")
    [[ -n $mom ]] && sets+=(--set "collective.diloco.outer_momentum=$mom")
    [[ -n $wire ]] && sets+=(--set "collective.diloco.wire=$wire")
    run_one "$rate" "h${item//:/_}" "${sets[@]}"
  done
done
sim_hosts_down
trap - EXIT

/usr/bin/python3 bench/lib/summarize_diloco.py "$OUT" "$RATES" "$HS" "$STEPS" "$TARGET" | tee "$OUT/summary.md"
gnuplot -e "out='$PNG'; dir='$OUT'; rates='$RATES'; hs='${HS//:/_}'; model='austen_gpt${SETS:+ (${SETS})}'" \
  bench/lib/diloco_loss.gp
echo "wrote $OUT/summary.md and $PNG" >&2
