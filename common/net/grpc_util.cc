#include "common/net/grpc_util.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/platform/descriptors.h"
#include "common/platform/status_macros.h"
#include "grpc/grpc.h"

namespace shardline {
namespace {

// Takes one reference on the gRPC library for the rest of the process, so
// destroying the last server or channel never runs gRPC's global shutdown.
// That shutdown joins gRPC 1.51's executor threads, one of which may sit in
// the TCP backup poller's 10 s epoll_wait: measured, half of the 4-process
// benchmark runs spent 10 s in exit. The process's exit frees everything
// anyway.
void HoldGrpcForProcessLifetime() {
  static const bool held = [] {
    grpc_init();
    return true;
  }();
  (void)held;
}

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

grpc::ChannelArguments DefaultChannelArguments() {
  HoldGrpcForProcessLifetime();
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  return args;
}

grpc::ChannelArguments ControlChannelArguments() {
  grpc::ChannelArguments args = DefaultChannelArguments();
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 5000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10000);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  return args;
}

std::vector<std::pair<std::string, int>> ControlServerArguments() {
  return {{GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 4000}, {GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0}};
}

absl::StatusOr<GrpcServer> StartGrpcServer(const std::string& listen, const std::vector<grpc::Service*>& services,
                                           const GrpcServerOptions& options) {
  // The standard grpc.health.v1 service: load balancers and Kubernetes probes
  // can ask whether the process is serving. (gRPC reads this process-wide
  // switch when the server is built.)
  HoldGrpcForProcessLifetime();
  grpc::EnableDefaultHealthCheckService(options.default_health_service);
  grpc::ServerBuilder builder;
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(options.max_receive_bytes);
  builder.SetMaxSendMessageSize(kMaxMessageBytes);
  for (const auto& [name, value] : options.int_args) builder.AddChannelArgument(name, value);
  const int idle_ms = static_cast<int>(absl::ToInt64Milliseconds(options.max_connection_idle));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, idle_ms);
  GrpcServer out;
  if (options.credentials != nullptr) {
    // TLS: gRPC accepts (it alone can hand a connection to its TLS
    // handshake); a connection that does not finish it is closed by then.
    builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS, std::min(idle_ms, 10'000));
    builder.AddListeningPort(listen, options.credentials, &out.port);
  } else {
    ConnectionGateOptions gate = options.gate;
    gate.env = options.env;
    if (gate.max_total == 0) gate.max_total = ConnectionBudget(DescriptorLimit());
    ASSIGN_OR_RETURN(out.gate, ConnectionGate::Listen(listen, std::move(gate)));
    out.port = out.gate->port();
  }
  for (grpc::Service* s : services) builder.RegisterService(s);
  if (options.configure) options.configure(&builder);
  out.server = builder.BuildAndStart();
  if (out.server == nullptr || out.port == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen for gRPC on ", listen, " (address in use or invalid)"));
  }
  if (out.gate != nullptr) out.gate->Serve(out.server.get());
  return out;
}

void GrpcServer::Shutdown(std::chrono::system_clock::time_point deadline) {
  if (gate != nullptr) gate->Stop();
  if (server != nullptr) server->Shutdown(deadline);
}

}  // namespace shardline
