// A received message's bytes, read in place: one or more contiguous pieces
// (a string for the in-process transport, gRPC's receive slices for the
// gRPC one), so the ring can reduce straight out of the network buffers.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<Payload> p, t->Receive(prev, tag, deadline));
//   RETURN_IF_ERROR(AddPayloadInto(*p, absl::MakeSpan(dst, n)));
#ifndef SHARDLINE_WORKER_COLLECTIVE_PAYLOAD_H_
#define SHARDLINE_WORKER_COLLECTIVE_PAYLOAD_H_

#include <cstddef>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "worker/collective/comm_memory.h"

namespace shardline {

class Payload {
 public:
  virtual ~Payload() = default;
  virtual size_t size() const = 0;
  // Calls fn(piece) for each contiguous piece, in order. Pieces may have any
  // length and alignment.
  virtual void ForEachPiece(const std::function<void(absl::Span<const char>)>& fn) const = 0;

 protected:
  // `held_bytes`: what the payload holds, counted in the process's
  // communication memory (comm_memory.h) until it is destroyed.
  explicit Payload(size_t held_bytes) : held_(held_bytes) {}

 private:
  CommMemoryCharge held_;
};

class StringPayload : public Payload {
 public:
  explicit StringPayload(std::string bytes) : Payload(bytes.size()), bytes_(std::move(bytes)) {}
  size_t size() const override { return bytes_.size(); }
  void ForEachPiece(const std::function<void(absl::Span<const char>)>& fn) const override {
    fn(absl::Span<const char>(bytes_.data(), bytes_.size()));
  }

 private:
  std::string bytes_;
};

// Copies the payload into `out`; kInternal naming both sizes if they differ.
absl::Status CopyPayloadInto(const Payload& payload, absl::Span<char> out);

// Adds the payload, read as floats, elementwise into `out` (out[i] =
// out[i] + p[i], in that order, so results do not depend on how the payload
// was cut into pieces). kInternal if the sizes differ.
absl::Status AddPayloadInto(const Payload& payload, absl::Span<float> out);

// The same two, also reporting whether any float the payload carried was
// an infinity or a NaN (`*nonfinite` is set to true then, and never reset),
// in the same pass over the bytes. The bytes are still delivered: what such
// values mean is for the caller to decide (see worker/train/nonfinite.h).
absl::Status CopyFloatsInto(const Payload& payload, absl::Span<float> out, bool* nonfinite);
absl::Status AddFloatsInto(const Payload& payload, absl::Span<float> out, bool* nonfinite);
// AddFloatsInto for a payload of bfloat16s (bf16.h), out.size() * 2 bytes:
// each is widened exactly to a float and added in order.
absl::Status AddBf16Into(const Payload& payload, absl::Span<float> out, bool* nonfinite);

}  // namespace shardline

#endif  // SHARDLINE_WORKER_COLLECTIVE_PAYLOAD_H_
