// The one place absl::Status and grpc::Status meet, and the gRPC server and
// channel settings every shardline process shares.
//
//   ASSIGN_OR_RETURN(GrpcServer server, StartGrpcServer("127.0.0.1:0", {&service}));
//   auto channel = grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(),
//                                            DefaultChannelArguments());
#ifndef SHARDLINE_COMMON_NET_GRPC_UTIL_H_
#define SHARDLINE_COMMON_NET_GRPC_UTIL_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/net/connection_gate.h"
#include "grpcpp/grpcpp.h"

namespace shardline {

// Same code, same message, both ways.
grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

// What a client may receive (and, by default, a server): 1 GiB. Servers set
// their own, smaller receive limit to what their protocol needs.
inline constexpr int kMaxMessageBytes = 1 << 30;

// Both DefaultChannelArguments and StartGrpcServer keep the gRPC library
// initialised until the process exits (so exit never waits on gRPC's global
// shutdown).
//
// Client settings: the raised message limit, and reconnect backoff capped at
// 1 s so a restarted peer is found quickly (gRPC's default can reach 120 s).
grpc::ChannelArguments DefaultChannelArguments();

// Keepalive on a control-plane channel (worker or launcher -> coordinator):
// an HTTP/2 ping every 5 s while a call is open, and a coordinator that does
// not answer one within 10 s is gone (the calls fail UNAVAILABLE). Without
// it a cut-off coordinator is noticed only when TCP gives up, many minutes
// later; with it, within 15 s, while a pause of up to ~10 s (SIGSTOP, a
// stalled host) is not mistaken for a loss.
grpc::ChannelArguments ControlChannelArguments();
// The coordinator's side: accepts those pings, also while a call carries no
// data (a Register waiting for the world to form).
std::vector<std::pair<std::string, int>> ControlServerArguments();

struct GrpcServer {
  std::unique_ptr<grpc::Server> server;
  int port = 0;  // the bound port (useful when listening on port 0)
  // The door of a plain-TCP server (connection_gate.h); null with TLS.
  // Declared after `server`, so it stops first.
  std::unique_ptr<ConnectionGate> gate;

  // Stops admitting connections, then shuts the server down by `deadline`.
  void Shutdown(std::chrono::system_clock::time_point deadline);
};

struct GrpcServerOptions {
  // The clock of the connection gate (plain TCP); required there.
  Env* env = nullptr;
  // Extra server channel arguments (e.g. keepalive).
  std::vector<std::pair<std::string, int>> int_args;
  // The largest message a client may send: what the protocol needs (larger
  // ones are refused by gRPC before they are buffered).
  int max_receive_bytes = kMaxMessageBytes;
  // Secure the port (e.g. mutual TLS); null: plain TCP, through the gate.
  std::shared_ptr<grpc::ServerCredentials> credentials;
  // Serve gRPC's own grpc.health.v1.Health (on its callback API). A server
  // whose methods are all asynchronous serves its own instead.
  bool default_health_service = true;
  // Called on the builder just before the server is built, e.g. to add the
  // completion queues of asynchronous methods; null: nothing.
  std::function<void(grpc::ServerBuilder*)> configure;
  // Plain TCP: the bounds of the connection gate (connection_gate.h).
  ConnectionGateOptions gate;
  // A connection with no call for this long is closed (gRPC sends GOAWAY;
  // a client reconnects by itself on its next call). With TLS, also the
  // deadline of the handshake.
  absl::Duration max_connection_idle = absl::Seconds(30);
};

// Starts a server on `listen` ("HOST:PORT") with `services`. SO_REUSEPORT is
// off, so a port already in use is an error (kUnavailable naming the
// address) instead of two servers silently sharing it. A plain-TCP server
// takes its connections through a ConnectionGate (bounded per address and
// in all, silent ones closed); every server closes idle connections.
absl::StatusOr<GrpcServer> StartGrpcServer(const std::string& listen, const std::vector<grpc::Service*>& services,
                                           const GrpcServerOptions& options = {});

}  // namespace shardline

#endif  // SHARDLINE_COMMON_NET_GRPC_UTIL_H_
