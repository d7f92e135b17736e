#include "worker/collective/grpc_wire.h"

#include "grpcpp/grpcpp.h"

namespace shardline {
namespace grpc_wire {

std::vector<std::pair<std::string, int>> DataPlaneArgs() {
  return {{GRPC_ARG_HTTP2_MAX_FRAME_SIZE, (1 << 24) - 1},
          {GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 64 << 20},
          {GRPC_ARG_HTTP2_WRITE_BUFFER_SIZE, 8 << 20},
          {GRPC_ARG_TCP_READ_CHUNK_SIZE, 4 << 20},
          {GRPC_ARG_TCP_MIN_READ_CHUNK_SIZE, 256 << 10},
          {GRPC_ARG_TCP_MAX_READ_CHUNK_SIZE, 4 << 20}};
}

// Keepalive settings (TransportServerOptions), shared by both ends.
std::vector<std::pair<std::string, int>> KeepaliveArgs(const TransportServerOptions& o) {
  return {{GRPC_ARG_KEEPALIVE_TIME_MS, static_cast<int>(absl::ToInt64Milliseconds(o.keepalive_time))},
          {GRPC_ARG_KEEPALIVE_TIMEOUT_MS, static_cast<int>(absl::ToInt64Milliseconds(o.keepalive_timeout))},
          {GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1},
          {GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0}};
}

}  // namespace grpc_wire
}  // namespace shardline
