#include "worker/collective/bf16.h"

namespace shardline {
namespace {

// One loop body, compiled twice: GCC vectorises the integer rounding, and the
// AVX2 copy does 8 floats per instruction where the baseline does 4. Both
// give the same bits (integer operations only).
#define SHARDLINE_ROUND_LOOP                                   \
  for (size_t i = 0; i < n; ++i) out[i] = FloatToBf16(in[i]);

__attribute__((target("avx2"))) void RoundAvx2(const float* in, uint16_t* out, size_t n) { SHARDLINE_ROUND_LOOP }
void RoundBase(const float* in, uint16_t* out, size_t n) { SHARDLINE_ROUND_LOOP }

#undef SHARDLINE_ROUND_LOOP

}  // namespace

void RoundToBf16(absl::Span<const float> in, uint16_t* out) {
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2) {
    RoundAvx2(in.data(), out, in.size());
  } else {
    RoundBase(in.data(), out, in.size());
  }
}

}  // namespace shardline
