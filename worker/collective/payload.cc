#include "worker/collective/payload.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/platform/status_macros.h"
#include "common/encoding/bf16.h"

namespace shardline {
namespace {

absl::Status SizeMismatch(size_t got, size_t want) {
  return absl::InternalError(absl::StrCat("received a message of ", got, " bytes; expected ", want));
}

}  // namespace

absl::Status CopyPayloadInto(const Payload& payload, absl::Span<char> out) {
  if (payload.size() != out.size()) return SizeMismatch(payload.size(), out.size());
  size_t at = 0;
  payload.ForEachPiece([&](absl::Span<const char> piece) {
    if (piece.empty()) return;  // memcpy's pointers must not be null, even for 0 bytes
    std::memcpy(out.data() + at, piece.data(), piece.size());
    at += piece.size();
  });
  return absl::OkStatus();
}

namespace {

// One value of the wire, read from unaligned bytes: a float, or (kBf16) a
// bfloat16 widened exactly to a float.
template <bool kBf16>
inline float Load(const char* src, size_t i) {
  if (kBf16) {
    uint16_t h;
    std::memcpy(&h, src + i * sizeof(h), sizeof(h));
    return Bf16ToFloat(h);
  }
  float v;
  std::memcpy(&v, src + i * sizeof(v), sizeof(v));
  return v;
}

template <bool kBf16>
constexpr size_t kWireSize = kBf16 ? sizeof(uint16_t) : sizeof(float);

// dst[i] (+)= src[i] for n values read from unaligned bytes. With kProbe,
// also accumulates src[i] * 0 into one of eight lanes: a lane stays 0 unless
// some src[i] is an infinity or a NaN, which makes it NaN. Eight independent
// lanes keep the loop vectorised without reordering any float sum (a fused
// integer test of the exponent bits is not vectorised by GCC: 6x slower).
template <bool kAdd, bool kProbe, bool kBf16>
void Floats(const char* src, float* dst, size_t n, float lanes[8]) {
  float acc[8];  // local, so the compiler knows dst cannot alias it
  std::memcpy(acc, lanes, sizeof(acc));
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (size_t j = 0; j < 8; ++j) {
      const float v = Load<kBf16>(src, i + j);
      dst[i + j] = kAdd ? dst[i + j] + v : v;
      if (kProbe) acc[j] += v * 0.0f;
    }
  }
  for (; i < n; ++i) {
    const float v = Load<kBf16>(src, i);
    dst[i] = kAdd ? dst[i] + v : v;
    if (kProbe) acc[0] += v * 0.0f;
  }
  std::memcpy(lanes, acc, sizeof(acc));
}

// The payload's values into `out` (added or copied), however its pieces cut
// them; with kProbe, *nonfinite is set if any of them is non-finite.
template <bool kAdd, bool kProbe, bool kBf16 = false>
absl::Status FloatsInto(const Payload& payload, absl::Span<float> out, bool* nonfinite) {
  constexpr size_t kSize = kWireSize<kBf16>;
  if (payload.size() != out.size() * kSize) return SizeMismatch(payload.size(), out.size() * kSize);
  char carry[kSize];  // a value split across two pieces
  size_t carried = 0;
  float* dst = out.data();
  float lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  payload.ForEachPiece([&](absl::Span<const char> piece) {
    const char* p = piece.data();
    size_t left = piece.size();
    if (carried > 0) {
      const size_t take = std::min(kSize - carried, left);
      std::memcpy(carry + carried, p, take);
      carried += take;
      p += take;
      left -= take;
      if (carried < kSize) return;
      Floats<kAdd, kProbe, kBf16>(carry, dst++, 1, lanes);
      carried = 0;
    }
    const size_t n = left / kSize;
    Floats<kAdd, kProbe, kBf16>(p, dst, n, lanes);
    dst += n;
    p += n * kSize;
    left -= n * kSize;
    std::memcpy(carry, p, left);
    carried = left;
  });
  if (kProbe) {
    float all = 0;
    for (float lane : lanes) all += lane;
    if (all != 0.0f) *nonfinite = true;  // NaN compares unequal
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status AddPayloadInto(const Payload& payload, absl::Span<float> out) {
  return FloatsInto</*kAdd=*/true, /*kProbe=*/false>(payload, out, nullptr);
}

absl::Status AddFloatsInto(const Payload& payload, absl::Span<float> out, bool* nonfinite) {
  return FloatsInto</*kAdd=*/true, /*kProbe=*/true>(payload, out, nonfinite);
}

absl::Status CopyFloatsInto(const Payload& payload, absl::Span<float> out, bool* nonfinite) {
  return FloatsInto</*kAdd=*/false, /*kProbe=*/true>(payload, out, nonfinite);
}

absl::Status AddBf16Into(const Payload& payload, absl::Span<float> out, bool* nonfinite) {
  return FloatsInto</*kAdd=*/true, /*kProbe=*/true, /*kBf16=*/true>(payload, out, nonfinite);
}

}  // namespace shardline
