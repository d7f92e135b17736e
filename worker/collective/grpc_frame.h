// How a transport frame travels through gRPC without copying its payload.
//
// On the wire a frame is exactly the protobuf message shardline.transport.Frame
// (proto/transport.proto): fields 1-3 as varints, then field 4, the payload.
// Instead of building a Frame (which would copy the payload into a string
// and again into gRPC's buffers), OutFrame's serialization copies the payload
// once, straight from the caller's memory into a gRPC slice, and InFrame's
// deserialization keeps gRPC's receive slices and reads the payload from
// them in place. Any protobuf implementation can still read or write
// these frames.
#ifndef SHARDLINE_WORKER_COLLECTIVE_GRPC_FRAME_H_
#define SHARDLINE_WORKER_COLLECTIVE_GRPC_FRAME_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/platform/mutex.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/support/byte_buffer.h"
#include "worker/collective/payload.h"

namespace shardline {

// Counts queued frames whose payload still points at caller memory, so a
// transport can tell when that memory is free again.
class SendTracker {
 public:
  void Add();
  void Release();
  // True if nothing is referenced any more by `deadline`.
  bool WaitIdle(absl::Time deadline);

 private:
  Mutex mu_;
  int64_t outstanding_ ABSL_GUARDED_BY(mu_) = 0;
};

struct OutFrame {
  int32_t src_rank = 0;
  uint64_t generation = 0;
  uint64_t tag = 0;
  // The caller's bytes, read when the frame is serialised (copied once into
  // a gRPC slice); `tracker` is released after that, or when the frame is
  // dropped. Ignored when `owned` is not empty.
  absl::Span<const char> payload;
  SendTracker* tracker = nullptr;
  std::string owned;  // payload storage when the frame owns its bytes
};

struct InFrame {
  int32_t src_rank = 0;
  uint64_t generation = 0;
  uint64_t tag = 0;
  std::unique_ptr<Payload> payload;
};

}  // namespace shardline

namespace grpc {

template <>
class SerializationTraits<shardline::OutFrame, void> {
 public:
  static Status Serialize(const shardline::OutFrame& frame, ByteBuffer* buffer, bool* own_buffer);
  static Status Deserialize(ByteBuffer* buffer, shardline::OutFrame* frame);
};

template <>
class SerializationTraits<shardline::InFrame, void> {
 public:
  static Status Serialize(const shardline::InFrame& frame, ByteBuffer* buffer, bool* own_buffer);
  static Status Deserialize(ByteBuffer* buffer, shardline::InFrame* frame);
};

}  // namespace grpc

#endif  // SHARDLINE_WORKER_COLLECTIVE_GRPC_FRAME_H_
