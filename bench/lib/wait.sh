# Bounded waits for the bench scripts (source it). A wait that runs out ends
# the script with exit 1, naming what did not come; each script's EXIT trap
# stops what it started.

# wait_for SECONDS WHAT COMMAND...: polls COMMAND every 10 ms until it
# succeeds, for at most SECONDS.
wait_for() {
  local limit=$1 what=$2
  shift 2
  local end=$(($(date +%s) + limit))
  until "$@"; do
    if [ "$(date +%s)" -ge $end ]; then
      echo "$(basename "$0"): $what did not come within ${limit}s" >&2
      exit 1
    fi
    sleep 0.01
  done
}

# count_above FILE PATTERN N: more than N lines of FILE match PATTERN.
count_above() {
  local n
  n=$(grep -c "$2" "$1" 2>/dev/null) || true
  [ "${n:-0}" -gt "$3" ]
}
