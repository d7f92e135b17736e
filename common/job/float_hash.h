// FloatHasher: a 64-bit hash of floats' bits, the same on every CPU; what
// ranks compare to show they hold the same values (the train step's
// parameter agreement, worker/train/param_agreement.h).
//
//   FloatHasher h;
//   h.Add(a.data(), a.size());
//   h.Add(b.data(), b.size());
//   const uint64_t digest = h.Digest();  // == HashFloats(a then b)
#ifndef SHARDLINE_COMMON_JOB_FLOAT_HASH_H_
#define SHARDLINE_COMMON_JOB_FLOAT_HASH_H_

#include <cstdint>

#include "absl/types/span.h"

namespace shardline {

// A 64-bit hash of a sequence of floats (their bits; -0 and 0 differ, and
// so do two NaNs of other payloads), in the order added. Integer arithmetic
// only: the same value on every CPU. Eight lanes, each a bijection of its
// state for a given word, so a single changed word always changes the
// digest; the lanes are folded with the count at the end.
class FloatHasher {
 public:
  void Add(const float* values, int64_t n);
  uint64_t Digest() const;
  int64_t count() const { return count_; }

 private:
  static constexpr int kLanes = 8;
  uint32_t lanes_[kLanes] = {0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u,
                             0xa4093822u, 0x299f31d0u, 0x082efa98u, 0xec4e6c89u};
  int64_t count_ = 0;  // floats added; the next one goes to lane count_ % kLanes
};

uint64_t HashFloats(absl::Span<const float> values);

// SplitMix64's step: a bijective 64-bit mix (the digest's, and the replay
// audits' seeded start: worker/train/audit.cc).
uint64_t SplitMix64(uint64_t x);

}  // namespace shardline

#endif  // SHARDLINE_COMMON_JOB_FLOAT_HASH_H_
