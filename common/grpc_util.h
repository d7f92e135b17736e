// The one place absl::Status and grpc::Status meet, and the gRPC server and
// channel settings every shardline process shares.
//
//   ASSIGN_OR_RETURN(GrpcServer server, StartGrpcServer("127.0.0.1:0", {&service}));
//   auto channel = grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(),
//                                            DefaultChannelArguments());
#ifndef SHARDLINE_COMMON_GRPC_UTIL_H_
#define SHARDLINE_COMMON_GRPC_UTIL_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
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
};

// Starts a server on `listen` ("HOST:PORT") with `services`. SO_REUSEPORT is
// off, so a port already in use is an error (kUnavailable naming the
// address) instead of two servers silently sharing it. The server also
// serves grpc.health.v1.Health.
// `int_args` are extra server channel arguments (e.g. keepalive);
// `max_receive_bytes` is the largest message a client may send (what the
// protocol needs: larger ones are refused by gRPC before they are buffered);
// `credentials` (e.g. mutual TLS) secure the port.
absl::StatusOr<GrpcServer> StartGrpcServer(
    const std::string& listen, const std::vector<grpc::Service*>& services,
    const std::vector<std::pair<std::string, int>>& int_args = {}, int max_receive_bytes = kMaxMessageBytes,
    std::shared_ptr<grpc::ServerCredentials> credentials = nullptr);  // null: plain TCP

}  // namespace shardline

#endif  // SHARDLINE_COMMON_GRPC_UTIL_H_
