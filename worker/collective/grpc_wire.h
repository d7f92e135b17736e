// What both ends of the data plane's one RPC agree on: the method, the
// frame tag that carries a failure report, the park-tag metadata and the
// channel arguments. Internal to worker/collective's gRPC transport
// (grpc_peer_stream.cc sends, grpc_push_server.cc receives).
#ifndef SHARDLINE_WORKER_COLLECTIVE_GRPC_WIRE_H_
#define SHARDLINE_WORKER_COLLECTIVE_GRPC_WIRE_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "worker/collective/grpc_transport.h"

namespace shardline {
namespace grpc_wire {

// The one RPC of proto/transport.proto. Its stub and handler are written
// against OutFrame/InFrame (grpc_frame.h) instead of the generated Frame, so
// payloads are not copied; the bytes on the wire are still a Frame.
inline constexpr char kPushMethod[] = "/shardline.transport.Transport/Push";

// A frame with this tag carries a reason the world is broken, not data.
inline constexpr uint64_t kPoisonTag = ~uint64_t{0};
// Once this process has joined a generation, a stream may name one at most
// this far ahead (a peer can be one generation ahead while this rank is
// still leaving the last); further ahead is refused at once.
inline constexpr uint64_t kMaxGenerationsAhead = 2;
// Streams waiting for this process to reach their generation, each holding
// its first frame (at most one segment) and no thread; more are refused, as
// is a second one from the same sender for the same generation beyond
// kMaxParkedPerSender.
inline constexpr size_t kMaxParkedStreams = 64;
inline constexpr int kMaxParkedPerSender = 2;
// Metadata of a stream's park tag: "<receiver rank>.<ParkTag>".
inline constexpr char kParkTagMetadataKey[] = "shardline-park";

// Data-plane settings shared by both ends of a Push stream, as
// (name, value) pairs. The reasons:
//  - max_frame_size: HTTP/2 DATA frames of up to 16 MiB instead of 16 KiB,
//    so a 1 MiB segment is one frame, not 64 (fewer headers and wakeups).
//  - lookahead/write buffer: flow-control windows large enough that a
//    sender never stalls on a segment or two in flight (Gloo keeps two).
//  - read chunks of up to 4 MiB: fewer read syscalls per segment.
std::vector<std::pair<std::string, int>> DataPlaneArgs();

// Keepalive settings (TransportServerOptions), shared by both ends.
std::vector<std::pair<std::string, int>> KeepaliveArgs(const TransportServerOptions& o);

}  // namespace grpc_wire
}  // namespace shardline

#endif  // SHARDLINE_WORKER_COLLECTIVE_GRPC_WIRE_H_
