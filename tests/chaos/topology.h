// Simulated hosts for the chaos harness: each host is a network namespace
// with one interface (eth0, 10.213.0.<host+1>/24) on a veth pair whose other
// end is a port of a bridge in a namespace of its own - a switch. Nothing is
// created in the namespace the harness runs in. The faults a network can
// have are made on the switch side (port down, port detached) or on the
// host's interface (a token-bucket rate limit).
//
//   ASSIGN_OR_RETURN(auto net, Topology::Create("slc1234", 3));
//   net->Address(0);              // "10.213.0.1"
//   net->NetnsPath(0);            // "/run/netns/slc1234h0": setns() into it
//   RETURN_IF_ERROR(net->SetPortUp(2, false));
//   // ~Topology removes every namespace (and so every link) it created
#ifndef SHARDLINE_TESTS_CHAOS_TOPOLOGY_H_
#define SHARDLINE_TESTS_CHAOS_TOPOLOGY_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace shardline {

class Topology {
 public:
  // `prefix`: at most 8 characters, unique on the machine (names of
  // namespaces and interfaces are built from it).
  static absl::StatusOr<std::unique_ptr<Topology>> Create(const std::string& prefix, int hosts);
  ~Topology();

  int hosts() const { return hosts_; }
  std::string Address(int host) const;
  std::string Netns(int host) const;
  std::string NetnsPath(int host) const { return "/run/netns/" + Netns(host); }

  // The switch port of `host` up or down: down, the host's interface loses
  // its carrier (a pulled cable).
  absl::Status SetPortUp(int host, bool up);
  // Detached from the bridge, the port stays up and everything sent through
  // it vanishes, both ways (a silent black hole).
  absl::Status SetAttached(int host, bool attached);
  // A token-bucket rate limit on the host's outgoing traffic; 0: none.
  absl::Status SetRateLimit(int host, int kbit_per_second);

 private:
  Topology(std::string prefix, int hosts) : prefix_(std::move(prefix)), hosts_(hosts) {}
  std::string SwitchNetns() const { return prefix_ + "sw"; }
  std::string Port(int host) const;

  const std::string prefix_;
  const int hosts_;
  std::vector<std::string> created_;  // namespaces, removed in reverse
};

}  // namespace shardline

#endif  // SHARDLINE_TESTS_CHAOS_TOPOLOGY_H_
