# Sourced by the bench scripts: one job of N workers on this host, each in a
# cgroup v1 memory group of its own capped at CAP_MB (created here, removed
# when the job ends), with the coordinator outside any cap. While the job
# runs, each worker's /proc/PID/status is read every second; at its end one
# line per worker: "rank max_VmRSS_MiB max_RssAnon_MiB max_RssFile_MiB
# group_max_usage_MiB oom_kills max_cache_MiB kmem_max_usage_MiB" in
# DIR/memory.dat (cache: the group's page cache and shared memory, sampled
# with the RSS; kmem: what the kernel charged it for itself, sockets too), and the outcome
# ("finished", "failed", "killed for memory", "timeout") on stdout.
#
#   . bench/lib/capped_job.sh
#   capped_job DIR CAP_MB N TIMEOUT_S CONFIG --set ... --set ...
# Needs root and cgroup v1's memory controller at /sys/fs/cgroup/memory.
# Runs in a subshell of its own, whose exit (however it comes) kills what
# it started and removes its groups.
capped_job() {  # DIR CAP_MB N TIMEOUT CONFIG SETS...
  (capped_job_body "$@")
}

capped_job_body() {
  local dir=$1 cap=$2 n=$3 timeout=$4 config=$5 r
  shift 5
  local -a CAPPED_PIDS=() CAPPED_GROUPS=()
  # shellcheck disable=SC2317
  capped_job_cleanup() {
    local p g
    for p in "${CAPPED_PIDS[@]}"; do kill -9 "$p" 2> /dev/null || true; done
    for p in "${CAPPED_PIDS[@]}"; do wait "$p" 2> /dev/null || true; done
    for g in "${CAPPED_GROUPS[@]}"; do [[ -d $g ]] && { rmdir "$g" 2> /dev/null || { sleep 1; rmdir "$g"; }; }; done
  }
  trap capped_job_cleanup EXIT
  local root=/sys/fs/cgroup/memory
  [[ -w $root ]] || { echo "needs cgroup v1's memory controller writable at $root (root)" >&2; return 1; }
  rm -rf "$dir" && mkdir -p "$dir/logs"
  head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$dir/token"
  chmod 600 "$dir/token"
  local port
  port=$(build/bin/shardline port)
  build/bin/shardline-coordinator --config "$config" --listen "127.0.0.1:$port" --workdir "$dir/work" \
    --metrics_listen 127.0.0.1:0 --token_file "$dir/token" "$@" --set "runtime.num_workers=$n" \
    > "$dir/logs/coordinator.log" 2>&1 &
  local coordinator=$! workers=() groups=()
  CAPPED_PIDS+=("$coordinator")
  for ((r = 0; r < n; r++)); do
    local g="$root/shardline_capped_${BASHPID}_${RANDOM}_r$r"
    mkdir "$g" && groups+=("$g") && CAPPED_GROUPS+=("$g")
    echo $((cap * 1024 * 1024)) > "$g/memory.limit_in_bytes"
    build/bin/shardline credential --rank "$r" --out "$dir/rank-$r" --token_file "$dir/token" > /dev/null
    bash -c 'echo $$ > "$1/cgroup.procs" && shift && exec "$@"' _ "$g" build/bin/shardline-worker \
      --coordinator "127.0.0.1:$port" --listen 127.0.0.1:0 --metrics_listen 127.0.0.1:0 --rank "$r" \
      --token_file "$dir/rank-$r" > "$dir/logs/worker-$r.log" 2>&1 &
    workers+=($!)
    CAPPED_PIDS+=($!)
  done
  local -a rss anon file cache
  for ((r = 0; r < n; r++)); do rss[r]=0 anon[r]=0 file[r]=0 cache[r]=0; done
  local outcome=timeout t
  for ((t = 0; t < timeout; t++)); do
    for ((r = 0; r < n; r++)); do
      local st="/proc/${workers[r]}/status" v
      # Before the status: a worker the kernel killed has none.
      if grep -q "oom_kill [1-9]" "${groups[r]}/memory.oom_control" 2> /dev/null; then outcome="killed for memory"; fi
      [[ -r $st ]] || continue
      v=$(awk '$1 == "VmRSS:" {print $2}' "$st" 2> /dev/null || true)
      [[ -n $v ]] && ((v > rss[r])) && rss[r]=$v
      v=$(awk '$1 == "RssAnon:" {print $2}' "$st" 2> /dev/null || true)
      [[ -n $v ]] && ((v > anon[r])) && anon[r]=$v
      v=$(awk '$1 == "RssFile:" {print $2}' "$st" 2> /dev/null || true)
      [[ -n $v ]] && ((v > file[r])) && file[r]=$v
      v=$(awk '$1 == "cache" {print int($2 / 1024)}' "${groups[r]}/memory.stat" 2> /dev/null || true)
      [[ -n $v ]] && ((v > cache[r])) && cache[r]=$v
    done
    [[ $outcome == "killed for memory" ]] && break
    if ! kill -0 "$coordinator" 2> /dev/null; then
      if wait "$coordinator"; then outcome=finished; else outcome=failed; fi
      break
    fi
    sleep 1
  done
  for _ in $(seq 1 30); do
    local alive=0 p
    for p in "${workers[@]}"; do kill -0 "$p" 2> /dev/null && alive=1; done
    [[ $alive == 0 ]] && break
    sleep 1
  done
  for p in "$coordinator" "${workers[@]}"; do kill -9 "$p" 2> /dev/null || true; done
  wait "$coordinator" "${workers[@]}" 2> /dev/null || true
  CAPPED_PIDS=()
  : > "$dir/memory.dat"
  for ((r = 0; r < n; r++)); do
    local g=${groups[r]} usage kills kmem
    usage=$(($(cat "$g/memory.max_usage_in_bytes") / 1048576))
    kills=$(awk '$1 == "oom_kill" {print $2}' "$g/memory.oom_control" 2> /dev/null || echo 0)
    kmem=$(($(cat "$g/memory.kmem.max_usage_in_bytes" 2> /dev/null || echo 0) / 1048576))
    echo "$r $((rss[r] / 1024)) $((anon[r] / 1024)) $((file[r] / 1024)) $usage ${kills:-0} $((cache[r] / 1024)) $kmem" >> "$dir/memory.dat"
  done
  capped_job_cleanup
  CAPPED_GROUPS=()
  echo "$outcome"
}
