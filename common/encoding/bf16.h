// bfloat16: the upper 16 bits of an IEEE float32 (sign, the 8 exponent bits,
// 7 mantissa bits) - what DDP's bf16 compression hook sends on the wire
// (collective.bf16_gradients) and what train.precision BF16's matrix
// products read (worker/model/gemm.h). Rounding is to nearest, ties to
// even, so it is a pure function of the float's bits: the same gradients
// give the same wire bytes, and the same operands the same products, on
// every run.
// Infinities stay infinities; a NaN stays a NaN (made quiet); a finite
// float past bf16's largest value (~3.39e38) rounds to an infinity.
//
//   std::vector<uint16_t> wire(n);
//   RoundToBf16(absl::MakeConstSpan(grads, n), wire.data());
//   ... received: AddBf16Into(payload, dst, &nonfinite) (payload.h) ...
#ifndef SHARDLINE_COMMON_ENCODING_BF16_H_
#define SHARDLINE_COMMON_ENCODING_BF16_H_

#include <cstdint>
#include <cstring>

#include "absl/types/span.h"

namespace shardline {

inline uint16_t FloatToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // NaN: keep it one
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

inline float Bf16ToFloat(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// out[i] = FloatToBf16(in[i]) for every i; `out` holds in.size() values.
void RoundToBf16(absl::Span<const float> in, uint16_t* out);

// out[i] = Bf16ToFloat(in[i]) for every i (exact: a bfloat16 is a float32
// whose low 16 bits are zero); `out` holds in.size() values.
void WidenBf16(absl::Span<const uint16_t> in, float* out);

}  // namespace shardline

#endif  // SHARDLINE_COMMON_ENCODING_BF16_H_
