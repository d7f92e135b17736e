// The door of every plain-TCP gRPC server of shardline: this process
// accepts the connections itself and hands gRPC only those it admits
// (issue 62). gRPC 1.51 has no bound on connections, and it stops accepting
// for good once accept4 returns EMFILE (grpc/grpc#16058): 21,000 idle
// connections that sent only the HTTP/2 preface made a coordinator miss
// heartbeats, fail checkpoint commits ("Too many open files") and never
// accept again. The gate
//   - bounds connections per peer address and in all, below the descriptor
//     limit with a reserve left for checkpoints and the store,
//   - closes a connection that sends nothing within `first_bytes_timeout`
//     (gRPC's own handshake deadline does not cover connections handed to
//     it), and leaves idle ones to gRPC's max-idle timer (the server's
//     GRPC_ARG_MAX_CONNECTION_IDLE_MS), and
//   - never stops accepting: a refused or failed accept is counted and the
//     loop goes on (EMFILE is met with a spare descriptor, closed to take
//     the connection off the queue and reopened).
// Connections handed to gRPC are counted until gRPC closes them (seen by
// their socket's inode no longer being behind their descriptor).
//
//   ASSIGN_OR_RETURN(std::unique_ptr<ConnectionGate> gate, ConnectionGate::Listen("127.0.0.1:0", options));
//   ... build a grpc::Server without listening ports ...
//   gate->Serve(server.get());   // until gate->Stop() or its destruction
#ifndef SHARDLINE_COMMON_NET_CONNECTION_GATE_H_
#define SHARDLINE_COMMON_NET_CONNECTION_GATE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/platform/env.h"
#include "grpcpp/grpcpp.h"

namespace shardline {

struct ConnectionGateOptions {
  // The clock of its deadlines; required, must outlive the gate.
  Env* env = nullptr;
  // Connections one peer address may hold at once: a host's workers, its
  // launcher and its operators' tools, with room to spare (a simulated
  // world of 256 workers on loopback is one address).
  int max_per_address = 1024;
  // Connections in all for addresses that hold `guaranteed_per_address` or
  // more; 0: from the descriptor limit (ConnectionBudget). An address that
  // holds fewer (a host's workers, an operator's `shardline status`) is
  // still admitted up to 1.5 x max_total, so a flood from a few addresses
  // that fills the server leaves room for everyone else.
  int max_total = 0;
  int guaranteed_per_address = 32;
  // A connection that sends no byte within this is closed unserved.
  absl::Duration first_bytes_timeout = absl::Seconds(5);
  // Runs for every connection refused or closed unserved, with its reason:
  // "per_address", "total", "silent" (sent nothing in time).
  std::function<void(const char* reason)> on_refused;
};

// Why a connection from an address holding `open_from_address` is not
// admitted when the server holds `open_total`, or kAdmit. Pure.
enum class GateVerdict { kAdmit, kPerAddress, kTotal };
GateVerdict AdmitConnection(int open_from_address, int open_total, const ConnectionGateOptions& options);
const char* GateVerdictLabel(GateVerdict v);

// Descriptors a process keeps free of connections for its own files:
// checkpoint shards, the RocksDB store, logs, metrics.
inline constexpr int kDescriptorReserve = 512;
// The connections a server may hold in all (max_total) when the process
// may open `descriptor_limit` descriptors: half of what is left after the
// reserve (a process has more than one server, and each connection of its
// own clients takes a descriptor too), at least 64. With the guaranteed
// share on top (1.5 x) it stays under the limit less the reserve.
int ConnectionBudget(int64_t descriptor_limit);

class ConnectionGate {
 public:
  // Binds and listens on `listen` ("HOST:PORT"; port 0 picks a free one).
  // SO_REUSEPORT is off: a port in use is UNAVAILABLE naming the address.
  static absl::StatusOr<std::unique_ptr<ConnectionGate>> Listen(const std::string& listen,
                                                                ConnectionGateOptions options);
  ~ConnectionGate();  // Stop()

  int port() const { return port_; }
  // Starts handing admitted connections to `server` (which must outlive
  // this gate or Stop()) on a thread of its own.
  void Serve(grpc::Server* server);
  // Stops accepting and closes the listening socket and every connection
  // not yet handed over; idempotent.
  void Stop();

  // Connections handed to gRPC and still open, as last counted.
  int open() const;

 private:
  ConnectionGate(int listen_fd, int port, ConnectionGateOptions options);
  void Run(grpc::Server* server);

  const int listen_fd_;
  const int port_;
  const ConnectionGateOptions options_;
  int wake_[2] = {-1, -1};  // a pipe: a byte wakes the loop to stop
  std::thread thread_;
  std::atomic<int> open_{0};
  bool stopped_ = false;
};

}  // namespace shardline

#endif  // SHARDLINE_COMMON_NET_CONNECTION_GATE_H_
