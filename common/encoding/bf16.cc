#include "common/encoding/bf16.h"

namespace shardline {
namespace {

// One loop body, compiled three times: GCC vectorises the integer
// rounding, and the AVX-512 copy does 16 floats per instruction, the AVX2
// copy 8, the baseline 4. All give the same bits (integer operations only).
#define SHARDLINE_ROUND_LOOP                                   \
  for (size_t i = 0; i < n; ++i) out[i] = FloatToBf16(in[i]);

__attribute__((target("avx512f,avx512bw"))) void RoundAvx512(const float* in, uint16_t* out, size_t n) {
  SHARDLINE_ROUND_LOOP
}
__attribute__((target("avx2"))) void RoundAvx2(const float* in, uint16_t* out, size_t n) { SHARDLINE_ROUND_LOOP }
void RoundBase(const float* in, uint16_t* out, size_t n) { SHARDLINE_ROUND_LOOP }

#undef SHARDLINE_ROUND_LOOP

#define SHARDLINE_WIDEN_LOOP \
  for (size_t i = 0; i < n; ++i) out[i] = Bf16ToFloat(in[i]);

__attribute__((target("avx512f,avx512bw"))) void WidenAvx512(const uint16_t* in, float* out, size_t n) {
  SHARDLINE_WIDEN_LOOP
}
__attribute__((target("avx2"))) void WidenAvx2(const uint16_t* in, float* out, size_t n) { SHARDLINE_WIDEN_LOOP }
void WidenBase(const uint16_t* in, float* out, size_t n) { SHARDLINE_WIDEN_LOOP }

#undef SHARDLINE_WIDEN_LOOP

// Which copy of the loops this CPU runs, decided once.
enum class Isa { kAvx512, kAvx2, kBase };
Isa Widest() {
  static const Isa isa = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") ? Isa::kAvx512
                         : __builtin_cpu_supports("avx2")                                         ? Isa::kAvx2
                                                                                                  : Isa::kBase;
  return isa;
}

}  // namespace

void RoundToBf16(absl::Span<const float> in, uint16_t* out) {
  switch (Widest()) {
    case Isa::kAvx512: return RoundAvx512(in.data(), out, in.size());
    case Isa::kAvx2: return RoundAvx2(in.data(), out, in.size());
    case Isa::kBase: return RoundBase(in.data(), out, in.size());
  }
}

void WidenBf16(absl::Span<const uint16_t> in, float* out) {
  switch (Widest()) {
    case Isa::kAvx512: return WidenAvx512(in.data(), out, in.size());
    case Isa::kAvx2: return WidenAvx2(in.data(), out, in.size());
    case Isa::kBase: return WidenBase(in.data(), out, in.size());
  }
}

}  // namespace shardline
