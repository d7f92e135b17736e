#!/usr/bin/env bash
# Issue 49: token shards.
# PART 1: the Austen corpus, 2 workers, MINUTES (default 10) of training
#   each (steps set from a short calibration run, so every run trains for
#   the same wall time with its cosine schedule ending at its end): bits per
#   byte on the validation novel for bytes (austen_gpt) and for SentencePiece
#   vocabularies of 1k, 4k and 16k (austen_gpt_tokens, the same model), and
#   PyTorch DDP (2 ranks, OMP_NUM_THREADS=1, nanoGPT-style random windows)
#   on the same tokens for the same time.
# PART 2: a corpus larger than a worker's memory: CORPUS_MB (default 4096)
#   of Austen's lines drawn with a seed (bench/lib/make_corpus.py); tokenize
#   throughput on one core; 4 workers training from prefixes of it (100 MB
#   to all of it), each in a cgroup capped at CAP_MB (default 1024; root and
#   cgroup v1), each worker's peak private (RssAnon) and mapped (RssFile)
#   memory, and the curve in bench/tokens_memory.png.
# One command:
#   bench/drivers/tokens_bench.sh
#   PARTS=1 MINUTES=2 VOCABS="4096" bench/drivers/tokens_bench.sh   # a quick look
#   TORCH="bytes 4096" bench/drivers/tokens_bench.sh                 # PyTorch on two of the four
#   BYTES=0 VOCABS="16384" bench/drivers/tokens_bench.sh              # one more row, no bytes run
set -euo pipefail
cd "$(dirname "$0")/../.."
PARTS=${PARTS:-1 2}
MINUTES=${MINUTES:-10}
VOCABS=${VOCABS:-1024 4096 16384}
BYTES=${BYTES:-1}  # 0: leave out the byte-level run (and its PyTorch twin)
TORCH=${TORCH:-bytes $VOCABS}  # the runs PyTorch repeats
CORPUS_MB=${CORPUS_MB:-4096}
CAP_MB=${CAP_MB:-1024}
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
if [[ -z ${SKIP_BUILD:-} ]]; then
  ./deploy/install-deps.sh --test > /dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends python3-torch python3-numpy > /dev/null
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release > /dev/null
  cmake --build build -j2 --target shardline_cli shardline_worker_bin shardline_coordinator_bin shardline_spm > /dev/null
fi
OUT=bench/out/tokens
mkdir -p "$OUT"
S=build/bin/shardline
DATA=$OUT/data
mkdir -p "$DATA"
[[ -f $DATA/text/train.txt ]] || $S data austen --out "$DATA/text" > /dev/null
tokens_for() {  # V: the token shards of vocabulary V (made once)
  local v=$1
  if [[ ! -f $DATA/tok$v/manifest.json ]]; then
    $S data tokenizer --input "$DATA/text/train.txt" --vocab_size "$v" --out "$DATA/spm$v" >&2
    $S data tokenize --tokenizer "$DATA/spm$v/tokenizer.model" --input "$DATA/text/train.txt" \
      --val "$DATA/text/val.txt" --out "$DATA/tok$v" >&2
  fi
  echo "$DATA/tok$v"
}
eval_field() {  # METRICS FIELD: the last eval line's field
  grep '"split":"eval"' "$1" | tail -1 | /usr/bin/python3 -c "import json,sys; print(json.loads(sys.stdin.read())['$2'])"
}

if [[ " $PARTS " == *" 1 "* ]]; then
  . bench/lib/ddp_local.sh
  CAL=40
  SECONDS_BUDGET=$((MINUTES * 60))
  [[ $BYTES == 0 ]] || : > "$OUT/quality.dat"  # rows are appended to the bytes run's
  run_one() {  # NAME CONFIG DATA_SETS... : calibrate, then train for the budget; appends to quality.dat
    local name=$1 config=$2
    shift 2
    local cal="$OUT/cal_$name"
    rm -rf "$cal"
    $S launch --config "$config" --workers 2 --workdir "$cal" "$@" --set "train.total_steps=$CAL" \
      --set "train.eval_every=$CAL" --set checkpoint.every_steps=0 --set checkpoint.save_final=false \
      --set checkpoint.best_metric= --set schedule.warmup_steps=5 > "$cal.log" 2>&1
    local per_step steps
    per_step=$(eval_field "$cal/metrics.jsonl" train_seconds)
    steps=$(/usr/bin/python3 -c "print(int($SECONDS_BUDGET / ($per_step / $CAL)))")
    local run="$OUT/run_$name"
    rm -rf "$run"
    echo "== $name: $steps steps (${per_step}s for $CAL)" >&2
    $S launch --config "$config" --workers 2 --workdir "$run" "$@" --set "train.total_steps=$steps" \
      --set "train.eval_every=$((steps / 5))" --set checkpoint.every_steps=0 --set checkpoint.save_final=false \
      --set checkpoint.best_metric= --set "schedule.warmup_steps=$((steps / 30))" > "$run.log" 2>&1
    echo "shardline $name $steps $(eval_field "$run/metrics.jsonl" train_seconds) $(eval_field "$run/metrics.jsonl" bits_per_byte)" \
      | tee -a "$OUT/quality.dat"
  }
  torch_one() {  # NAME DATA_ARGS... : DDP on 2 ranks for the same budget
    local name=$1
    shift
    local cal="$OUT/torch_cal_$name.jsonl" per_step steps
    ddp_local bench/peers/torch_gpt.py 2 train "$@" --steps "$CAL" --eval_every 0 --warmup 5 > "$cal"
    per_step=$(/usr/bin/python3 -c "import json; d=[json.loads(l) for l in open('$cal')][-1]; print(d['train_seconds'] / d['steps'])")
    steps=$(/usr/bin/python3 -c "print(int($SECONDS_BUDGET / $per_step))")
    echo "== torch $name: $steps steps" >&2
    ddp_local bench/peers/torch_gpt.py 2 train "$@" --steps "$steps" --eval_every "$((steps / 5))" \
      --warmup "$((steps / 30))" > "$OUT/torch_$name.jsonl"
    /usr/bin/python3 - "$OUT/torch_$name.jsonl" "$name" "$steps" << 'PY' | tee -a "$OUT/quality.dat"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
e = [l for l in lines if l.get("split") == "eval"][-1]
print(f"torch {sys.argv[2]} {sys.argv[3]} {e['train_seconds']:.1f} {e['bits_per_byte']:.4f}")
PY
  }
  if [[ $BYTES != 0 ]]; then
    run_one bytes deploy/configs/austen_gpt.textproto --set "data.text.train_path=$DATA/text/train.txt" \
      --set "data.text.val_path=$DATA/text/val.txt"
    [[ " $TORCH " == *" bytes "* ]] && torch_one bytes --train "$DATA/text/train.txt" --val "$DATA/text/val.txt"
  fi
  for v in $VOCABS; do
    dir=$(tokens_for "$v")
    run_one "spm$v" deploy/configs/austen_gpt_tokens.textproto --set "data.tokens.dir=$dir"
    [[ " $TORCH " == *" $v "* ]] && torch_one "spm$v" --tokens "$dir"
  done
  echo "(who, data, steps, training seconds, validation bits per byte)" >&2
fi

if [[ " $PARTS " == *" 2 "* ]]; then
  . bench/lib/capped_job.sh
  big=$OUT/big
  mkdir -p "$big"
  v=4096
  tokens_for "$v" > /dev/null
  if [[ ! -f $big/tokens/manifest.json ]]; then
    [[ -f $big/corpus.txt ]] ||
      /usr/bin/python3 bench/lib/make_corpus.py "$DATA/text/train.txt" "$big/corpus.txt" "$((CORPUS_MB * 1000000))" 0 >&2
    # One core: the tokenizer (the helper process) is the work; shardline only moves bytes.
    taskset -c 1 $S data tokenize --tokenizer "$DATA/spm$v/tokenizer.model" --input "$big/corpus.txt" \
      --val "$DATA/text/val.txt" --shard_tokens 13400000 --out "$big/tokens" | tee "$big/tokenize.txt"
    rm -f "$big/corpus.txt"
  fi
  : > "$OUT/memory.dat"
  for mb in 100 500 1000 2000 $CORPUS_MB; do
    # A prefix of the shards as its own manifest (the same shard files, linked).
    pre="$big/prefix_$mb"
    rm -rf "$pre" && mkdir -p "$pre"
    /usr/bin/python3 - "$big/tokens" "$pre" "$mb" << 'PY'
import json, os, sys
src, dst, mb = sys.argv[1], sys.argv[2], float(sys.argv[3])
m = json.load(open(f"{src}/manifest.json"))
train, total = [], 0
for s in m["train"]:
    if total >= mb * 1e6:
        break
    train.append(s)
    total += s["text_bytes"]
m["train"] = train
for s in train + m["val"] + [{"file": m["tokenizer"]["file"]}]:
    os.symlink(os.path.abspath(f"{src}/{s['file']}"), f"{dst}/{s['file']}")
json.dump(m, open(f"{dst}/manifest.json", "w"), indent=1)
print(f"{dst}: {len(train)} shards, {total / 1e6:.0f} MB of text", file=sys.stderr)
PY
    text_mb=$(/usr/bin/python3 -c "import json; m=json.load(open('$pre/manifest.json')); print(round(sum(s['text_bytes'] for s in m['train'])/1e6))")
    shard_mb=$(/usr/bin/python3 -c "import json; m=json.load(open('$pre/manifest.json')); print(round(sum(s['tokens'] for s in m['train'])*2/1e6))")
    echo "== corpus $text_mb MB of text ($shard_mb MB of shards), 4 workers capped at $CAP_MB MiB" >&2
    outcome=$(capped_job "$big/run_$mb" "$CAP_MB" 4 1800 deploy/configs/austen_gpt_tokens.textproto \
      --set "data.tokens.dir=$pre" --set train.total_steps=200 --set train.eval_every=0 \
      --set checkpoint.every_steps=100 --set schedule.warmup_steps=10 --set runtime.watchdog_timeout_seconds=900)
    while read -r r rss anon file usage kills; do
      echo "$text_mb $shard_mb $r $rss $anon $file $usage $kills $outcome" | tee -a "$OUT/memory.dat"
    done < "$big/run_$mb/memory.dat"
  done
  echo "(text MB, shard MB, rank, peak VmRSS MiB, peak RssAnon MiB, peak RssFile MiB, cgroup peak MiB, OOM kills, outcome)" >&2
  # The largest of the 4 workers, per corpus.
  awk '{k = $1; s[k] = $2; for (i = 4; i <= 7; i++) if ($i > m[k, i]) m[k, i] = $i}
       END {for (k in s) print k, s[k], m[k, 4], m[k, 5], m[k, 6], m[k, 7]}' "$OUT/memory.dat" | sort -n > "$OUT/memory_max.dat"
  gnuplot -e "dat='$OUT/memory_max.dat'; out='bench/tokens_memory.png'; cap=$CAP_MB" bench/lib/tokens_memory.gp
fi
