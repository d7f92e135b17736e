// Finiteness of float buffers, fast enough to run over every gradient and
// every received segment: the test looks at exponent bits only (all ones is
// an infinity or a NaN), so it is an integer OR-reduction the compiler
// vectorises, and it never traps or depends on the rounding mode.
//
//   if (!AllFinite(absl::MakeConstSpan(grads))) ...
#ifndef SHARDLINE_COMMON_FINITE_H_
#define SHARDLINE_COMMON_FINITE_H_

#include <cstdint>
#include <cstring>

#include "absl/types/span.h"

namespace shardline {

// 0 for a finite float's bit pattern, nonzero for an infinity or a NaN.
inline uint32_t NonFiniteBits(uint32_t bits) {
  constexpr uint32_t kExponent = 0x7f800000u;
  return static_cast<uint32_t>((bits & kExponent) == kExponent);
}

// True when every value is neither infinite nor NaN. `data` may be
// unaligned (it is read as bytes).
inline bool AllFinite(const char* data, size_t count) {
  uint32_t bad = 0;
  for (size_t i = 0; i < count; ++i) {
    uint32_t bits;
    std::memcpy(&bits, data + i * sizeof(bits), sizeof(bits));
    bad |= NonFiniteBits(bits);
  }
  return bad == 0;
}

inline bool AllFinite(absl::Span<const float> values) {
  return AllFinite(reinterpret_cast<const char*>(values.data()), values.size());
}

}  // namespace shardline

#endif  // SHARDLINE_COMMON_FINITE_H_
