// A TCP port a process can give up and bind again later.
//
// The kernel hands out ports from net.ipv4.ip_local_port_range both to
// bind(":0") and to outgoing connections. A server that listened on such a
// port and died can find it taken when it restarts: any process on the host
// that binds ":0" or connects in that moment may be given it. A port outside
// that range is only ever taken by a program that names it.
#ifndef SHARDLINE_COMMON_NET_STABLE_PORT_H_
#define SHARDLINE_COMMON_NET_STABLE_PORT_H_

#include <string>

#include "absl/status/statusor.h"
#include "common/platform/env.h"

namespace shardline {

struct StablePortOptions {
  // The file that holds "low high" of the ephemeral range.
  std::string port_range_file = "/proc/sys/net/ipv4/ip_local_port_range";
  // Candidates are drawn from [floor, low), or from (high, 65535] when the
  // range starts at or below floor.
  int floor = 10000;
  // Candidates tried, each by binding it on `host`, before giving up.
  int attempts = 64;
};

// Returns a port outside the ephemeral range that is free on `host` (an IPv4
// address) at the time of the call. The caller binds it soon after: another
// program naming the same port in between is the only race. NotFound when the
// ephemeral range leaves no room or every candidate tried was taken;
// InvalidArgument when `host` is not an IPv4 address.
absl::StatusOr<int> PickStablePort(Env* env, const std::string& host, const StablePortOptions& options = {});

}  // namespace shardline

#endif  // SHARDLINE_COMMON_NET_STABLE_PORT_H_
