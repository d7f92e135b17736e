# Simulated hosts for benches (sourced, not run): network namespaces
# ${SIM_PREFIX}h0 .. h<count-1>, each with one interface eth0
# (10.214.0.<h+1>/24) on a veth pair to a bridge in a namespace of its own
# (${SIM_PREFIX}sw, a switch). Every host's egress can be shaped with a
# token bucket (tc tbf). Everything is created by sim_hosts_up and removed by
# sim_hosts_down (registered on EXIT by sim_hosts_up); root is needed.
#
#   SIM_PREFIX=slsc; source bench/lib/sim_hosts.sh
#   sim_hosts_up 5; sim_shape 10gbit; sim_iperf out/iperf.json
#   ip netns exec "$(sim_ns 1)" ... "$(sim_addr 1)"

SIM_PREFIX=${SIM_PREFIX:-slsim}
SIM_HOSTS=0

sim_ns() { echo "${SIM_PREFIX}h$1"; }
sim_addr() { echo "10.214.0.$(($1 + 1))"; }

# Kills every process left in the prefix's namespaces (by PID) and deletes them.
sim_hosts_down() {
  local n pid
  for n in $(ip netns list | awk '{print $1}' | grep "^${SIM_PREFIX}" || true); do
    for pid in $(ip netns pids "$n" 2> /dev/null); do kill -9 "$pid" 2> /dev/null || true; done
    ip netns del "$n" 2> /dev/null || true
  done
}

# COUNT hosts on one switch, links unshaped.
sim_hosts_up() {
  [ "$(id -u)" = 0 ] || { echo "simulated hosts need root (network namespaces)" >&2; return 1; }
  trap sim_hosts_down EXIT
  sim_hosts_down
  SIM_HOSTS=$1
  local h
  ip netns add "${SIM_PREFIX}sw"
  ip -n "${SIM_PREFIX}sw" link add br0 type bridge
  ip -n "${SIM_PREFIX}sw" link set br0 up
  for ((h = 0; h < SIM_HOSTS; h++)); do
    ip netns add "$(sim_ns $h)"
    ip -n "${SIM_PREFIX}sw" link add "p$h" type veth peer name eth0 netns "$(sim_ns $h)"
    ip -n "${SIM_PREFIX}sw" link set "p$h" master br0 up
    ip -n "$(sim_ns $h)" addr add "$(sim_addr $h)/24" dev eth0
    ip -n "$(sim_ns $h)" link set eth0 up
    ip -n "$(sim_ns $h)" link set lo up
  done
}

# Every host's egress through tbf at RATE (e.g. 10gbit, 2500mbit; "none":
# unshaped), with the burst of bench/lib/tbf.py (1 ms at the rate, at least
# 64 KiB).
sim_shape() {
  local h burst
  for ((h = 0; h < SIM_HOSTS; h++)); do
    tc -n "$(sim_ns $h)" qdisc del dev eth0 root 2> /dev/null || true
    [ "$1" = none ] && continue
    burst=$(/usr/bin/python3 "${BASH_SOURCE[0]%/*}/tbf.py" "$1")
    tc -n "$(sim_ns $h)" qdisc add dev eth0 root tbf rate "$1" burst "$burst" latency 20ms
  done
}

# iperf3 from host 2 to host 1 (one stream, 3 s) as JSON into FILE: what a
# link carries now.
sim_iperf() {
  ip netns exec "$(sim_ns 1)" iperf3 -s -1 -p 5201 > /dev/null 2>&1 &
  local server=$!
  sleep 0.5
  ip netns exec "$(sim_ns 2)" timeout 30 iperf3 -c "$(sim_addr 1)" -p 5201 -t 3 -J > "$1" || true
  wait "$server" 2> /dev/null || true
}

# A shardline job on the hosts: the coordinator on host 0, worker r on host
# r+1, all with a fresh job token. DIR N CONFIG [coordinator flags...];
# returns nonzero if any process failed (logs in DIR). Each process is
# killed after SIM_TIMEOUT seconds (default 600).
sim_run_shardline() {
  local dir=$1 n=$2 config=$3 r pids=() token failed=0
  shift 3
  mkdir -p "$dir"
  token=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
  SHARDLINE_TOKEN=$token timeout "${SIM_TIMEOUT:-600}" ip netns exec "$(sim_ns 0)" build/bin/shardline-coordinator --config "$config" \
    --listen "$(sim_addr 0):7000" --workdir "$dir" --set "runtime.num_workers=$n" "$@" 2> "$dir/coordinator.log" &
  pids+=($!)
  for ((r = 0; r < n; r++)); do
    SHARDLINE_TOKEN=$token timeout "${SIM_TIMEOUT:-600}" ip netns exec "$(sim_ns $((r + 1)))" build/bin/shardline-worker \
      --coordinator "$(sim_addr 0):7000" --listen "$(sim_addr $((r + 1))):7100" --rank $r 2> "$dir/worker-$r.log" &
    pids+=($!)
  done
  for r in "${pids[@]}"; do wait "$r" || failed=1; done
  return $failed
}
