// Finiteness of a float buffer, for a rank's own gradients and updated
// shard each step: the test looks at exponent bits only (all ones is an
// infinity or a NaN), an integer OR-reduction that GCC vectorises at -O3 and
// that never traps or depends on the rounding mode. (Received segments are
// probed inside the add/copy loop instead: worker/collective/payload.h.)
//
//   if (!AllFinite(absl::MakeConstSpan(grads))) ...
#ifndef SHARDLINE_COMMON_JOB_FINITE_H_
#define SHARDLINE_COMMON_JOB_FINITE_H_

#include <cstdint>
#include <cstring>

#include "absl/types/span.h"

namespace shardline {

// True when every value is neither infinite nor NaN.
inline bool AllFinite(absl::Span<const float> values) {
  constexpr uint32_t kExponent = 0x7f800000u;
  uint32_t bad = 0;
  for (const float v : values) {
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof(bits));
    bad |= static_cast<uint32_t>((bits & kExponent) == kExponent);
  }
  return bad == 0;
}

}  // namespace shardline

#endif  // SHARDLINE_COMMON_JOB_FINITE_H_
