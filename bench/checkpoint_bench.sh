#!/usr/bin/env bash
# Issue 5 side by side: checkpoint shard write (fsync) and verified read
# throughput against the disk's own sequential write-with-fsync (dd
# conv=fsync) and read (dd) of the same size in the same directory, and the
# training stall of async against synchronous saves.
#
#   bench/checkpoint_bench.sh [DIR]     # DIR on the disk to measure (default bench/out/ckpt)
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-bench/out/ckpt}
./deploy/install-deps.sh
[ -x build/bench/checkpoint_bench ] || { cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build -j2; }
rm -rf "$DIR" && mkdir -p "$DIR"
W2_FLOATS=4215818   # MLP 784-2048-2048-10 parameters (params + momentum = 33.7 MB)
GIB_FLOATS=134217728  # 2 buffers x 512 MiB = 1 GiB

drop() { sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true; }
dd_mb() {  # MiB -> "write | read cached | read cold"
  local mb=$1 f="$DIR/dd.bin" w r c
  w=$( { dd if=/dev/zero of="$f" bs=1M count=$mb conv=fsync 2>&1 >/dev/null; } | awk '/copied/ {print $(NF-1), $NF}')
  r=$( { dd if="$f" of=/dev/null bs=1M 2>&1 >/dev/null; } | awk '/copied/ {print $(NF-1), $NF}')
  drop
  c=$( { dd if="$f" of=/dev/null bs=1M 2>&1 >/dev/null; } | awk '/copied/ {print $(NF-1), $NF}')
  rm -f "$f"
  echo "$w | $r | $c"
}
echo "== dd, 32 MiB and 1 GiB" >&2
echo "dd 32MiB write | read cached | read cold: $(dd_mb 32)"
echo "dd 1GiB write | read cached | read cold: $(dd_mb 1024)"
echo "== shardline shard files (write + fsync; restore = verify + copy into training buffers)" >&2
build/bench/checkpoint_bench "$DIR" $W2_FLOATS $GIB_FLOATS
build/bench/checkpoint_bench --cold "$DIR" $W2_FLOATS $GIB_FLOATS

echo "== W2 training stall: async vs synchronous saves every 20 steps" >&2
for mode in true false; do
  build/bin/shardline train --config deploy/configs/fmnist_mlp.textproto --workdir "$DIR/w2_$mode" \
    --set model.hidden_sizes=2048,2048 --set data.global_batch_size=256 --set train.total_steps=200 \
    --set train.eval_every=0 --set checkpoint.every_steps=20 --set checkpoint.keep_last=2 \
    --set checkpoint.async=$mode 2>&1 | grep "done:" | sed "s/^/async=$mode: /"
done
