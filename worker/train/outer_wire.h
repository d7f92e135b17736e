// The pseudo-gradient on the wire across islands (collective.diloco.wire):
// bfloat16, or int8 with a float32 scale per block of kInt8Block values. Pure
// functions: an island's encoding is a function of its values alone, and a
// sum of decodings is made in a fixed order by the caller (outer_step.h),
// so every island gets the same bits.
//
//   std::string bytes = EncodeOuterWire(config::DilocoConfig::INT8, delta);
//   RETURN_IF_ERROR(AddDecodedOuterWire(config::DilocoConfig::INT8, bytes, absl::MakeSpan(sum)));
#ifndef SHARDLINE_WORKER_TRAIN_OUTER_WIRE_H_
#define SHARDLINE_WORKER_TRAIN_OUTER_WIRE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "proto/config.pb.h"

namespace shardline {

inline constexpr int64_t kInt8Block = 1024;

// Bytes EncodeOuterWire makes of n values (BF16 or INT8).
int64_t OuterWireBytes(config::DilocoConfig::Wire wire, int64_t n);

// BF16: each value rounded to nearest even, 2 bytes. INT8: per block of
// kInt8Block values (the last may be shorter) a float32 scale s =
// max|x| / 127 (0 for a block of zeros), then each q = round(x / s) in
// [-127, 127], 1 byte. Little-endian. Values must be finite.
std::string EncodeOuterWire(config::DilocoConfig::Wire wire, absl::Span<const float> values);

// sum[i] += decoded value i. DataLoss if `bytes` is not OuterWireBytes long
// or holds a non-finite scale (a peer's fault: the caller names it).
absl::Status AddDecodedOuterWire(config::DilocoConfig::Wire wire, absl::string_view bytes, absl::Span<float> sum);

}  // namespace shardline

#endif  // SHARDLINE_WORKER_TRAIN_OUTER_WIRE_H_
