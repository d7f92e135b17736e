// shardline port: TCP ports a server can listen on now and bind again after
// a restart (common/net/stable_port.h), for scripts that start servers on a host.
#include <cstdio>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/platform/args.h"
#include "common/net/stable_port.h"
#include "worker/cli/commands.h"

namespace shardline {
namespace {

constexpr char kHelp[] =
    "usage: shardline port [--host ADDRESS] [--count N]\n"
    "\n"
    "Prints N distinct TCP ports (default 1), one per line, that are free on\n"
    "ADDRESS (an IPv4 address, default 127.0.0.1) and outside the kernel's\n"
    "ephemeral range (net.ipv4.ip_local_port_range). A port from bind(\":0\")\n"
    "comes from that range, so any process that connects somewhere may be\n"
    "handed it while its server restarts; one of these is only taken by a\n"
    "program that names it. Bind them soon: nothing holds them.\n"
    "\n"
    "Exit 0 with N lines; 1 when N free ports cannot be found (the message says\n"
    "why), with nothing printed.\n";

// How many times the N ports may be drawn again because a draw repeated one.
constexpr int kRedraws = 64;

absl::Status Port(const Args& args) {
  const std::string host = args.Has("host") ? args.Get("host") : "127.0.0.1";
  absl::StatusOr<int64_t> count = IntFlag(args, "count", 1);
  if (!count.ok()) return count.status();
  if (*count < 1 || *count > 1000) {
    return absl::InvalidArgumentError(absl::StrCat("--count: ", *count, " is not between 1 and 1000"));
  }
  std::set<int> ports;
  for (int draws = 0; static_cast<int64_t>(ports.size()) < *count; ++draws) {
    if (draws >= *count + kRedraws) {
      return absl::NotFoundError(absl::StrCat("found only ", ports.size(), " distinct free ports on ", host, " of ",
                                              *count, " asked for"));
    }
    absl::StatusOr<int> port = PickStablePort(Env::Default(), host);
    if (!port.ok()) return port.status();
    ports.insert(*port);
  }
  for (int p : ports) std::printf("%d\n", p);
  return absl::OkStatus();
}

}  // namespace

int PortCommand(int argc, char** argv) {
  Args args;
  absl::Status parsed = ParseArgs(argc, argv, 2, {{"host", "count"}, {}}, "shardline port", &args);
  return RunCommand(parsed, args, kHelp, "shardline port", Port);
}

}  // namespace shardline
