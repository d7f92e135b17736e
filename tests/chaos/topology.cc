#include "tests/chaos/topology.h"

#include "absl/strings/str_cat.h"
#include "common/platform/status_macros.h"
#include "tests/chaos/command.h"

namespace shardline {
namespace {

constexpr char kIp[] = "/usr/sbin/ip";
constexpr char kTc[] = "/usr/sbin/tc";

}  // namespace

std::string Topology::Address(int host) const { return absl::StrCat("10.213.0.", host + 1); }
std::string Topology::Netns(int host) const { return absl::StrCat(prefix_, "h", host); }
std::string Topology::Port(int host) const { return absl::StrCat("p", host); }

absl::StatusOr<std::unique_ptr<Topology>> Topology::Create(const std::string& prefix, int hosts) {
  if (prefix.empty() || prefix.size() > 8) return absl::InvalidArgumentError("topology prefix must be 1-8 characters");
  if (hosts < 1 || hosts > 200) return absl::InvalidArgumentError("hosts must be in [1, 200]");
  std::unique_ptr<Topology> t(new Topology(prefix, hosts));
  const std::string sw = t->SwitchNetns();
  RETURN_IF_ERROR(RunCommand({kIp, "netns", "add", sw}));
  t->created_.push_back(sw);
  RETURN_IF_ERROR(RunCommand({kIp, "-n", sw, "link", "add", "br0", "type", "bridge"}));
  RETURN_IF_ERROR(RunCommand({kIp, "-n", sw, "link", "set", "br0", "up"}));
  for (int h = 0; h < hosts; ++h) {
    const std::string ns = t->Netns(h);
    RETURN_IF_ERROR(RunCommand({kIp, "netns", "add", ns}));
    t->created_.push_back(ns);
    // The pair is made inside the host and its far end moved to the switch:
    // no interface ever appears in the harness's own namespace.
    RETURN_IF_ERROR(
        RunCommand({kIp, "-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", t->Port(h), "netns", sw}));
    RETURN_IF_ERROR(RunCommand({kIp, "-n", ns, "addr", "add", t->Address(h) + "/24", "dev", "eth0"}));
    RETURN_IF_ERROR(RunCommand({kIp, "-n", ns, "link", "set", "lo", "up"}));
    RETURN_IF_ERROR(RunCommand({kIp, "-n", ns, "link", "set", "eth0", "up"}));
    RETURN_IF_ERROR(RunCommand({kIp, "-n", sw, "link", "set", t->Port(h), "master", "br0"}));
    RETURN_IF_ERROR(RunCommand({kIp, "-n", sw, "link", "set", t->Port(h), "up"}));
  }
  return t;
}

Topology::~Topology() {
  for (auto it = created_.rbegin(); it != created_.rend(); ++it) RunCommand({kIp, "netns", "del", *it}).IgnoreError();
}

absl::Status Topology::SetPortUp(int host, bool up) {
  return RunCommand({kIp, "-n", SwitchNetns(), "link", "set", Port(host), up ? "up" : "down"});
}

absl::Status Topology::SetAttached(int host, bool attached) {
  if (attached) return RunCommand({kIp, "-n", SwitchNetns(), "link", "set", Port(host), "master", "br0"});
  return RunCommand({kIp, "-n", SwitchNetns(), "link", "set", Port(host), "nomaster"});
}

absl::Status Topology::SetRateLimit(int host, int kbit_per_second) {
  if (kbit_per_second <= 0) return RunCommand({kTc, "-n", Netns(host), "qdisc", "del", "dev", "eth0", "root"});
  return RunCommand({kTc, "-n", Netns(host), "qdisc", "replace", "dev", "eth0", "root", "tbf", "rate",
                     absl::StrCat(kbit_per_second, "kbit"), "burst", "64kb", "latency", "200ms"});
}

}  // namespace shardline
