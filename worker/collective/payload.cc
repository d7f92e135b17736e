#include "worker/collective/payload.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

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
    std::memcpy(out.data() + at, piece.data(), piece.size());
    at += piece.size();
  });
  return absl::OkStatus();
}

namespace {

// dst[i] (+)= src[i] for n floats read from unaligned bytes. With kProbe,
// also accumulates src[i] * 0 into one of eight lanes: a lane stays 0 unless
// some src[i] is an infinity or a NaN, which makes it NaN. Eight independent
// lanes keep the loop vectorised without reordering any float sum (a fused
// integer test of the exponent bits is not vectorised by GCC: 6x slower).
template <bool kAdd, bool kProbe>
void Floats(const char* src, float* dst, size_t n, float lanes[8]) {
  float acc[8];  // local, so the compiler knows dst cannot alias it
  std::memcpy(acc, lanes, sizeof(acc));
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (size_t j = 0; j < 8; ++j) {
      float v;
      std::memcpy(&v, src + (i + j) * sizeof(float), sizeof(v));
      dst[i + j] = kAdd ? dst[i + j] + v : v;
      if (kProbe) acc[j] += v * 0.0f;
    }
  }
  for (; i < n; ++i) {
    float v;
    std::memcpy(&v, src + i * sizeof(float), sizeof(v));
    dst[i] = kAdd ? dst[i] + v : v;
    if (kProbe) acc[0] += v * 0.0f;
  }
  std::memcpy(lanes, acc, sizeof(acc));
}

// The payload's floats into `out` (added or copied), however its pieces cut
// them; with kProbe, *nonfinite is set if any of them is non-finite.
template <bool kAdd, bool kProbe>
absl::Status FloatsInto(const Payload& payload, absl::Span<float> out, bool* nonfinite) {
  if (payload.size() != out.size() * sizeof(float)) {
    return SizeMismatch(payload.size(), out.size() * sizeof(float));
  }
  char carry[sizeof(float)];  // a float split across two pieces
  size_t carried = 0;
  float* dst = out.data();
  float lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  payload.ForEachPiece([&](absl::Span<const char> piece) {
    const char* p = piece.data();
    size_t left = piece.size();
    if (carried > 0) {
      const size_t take = std::min(sizeof(float) - carried, left);
      std::memcpy(carry + carried, p, take);
      carried += take;
      p += take;
      left -= take;
      if (carried < sizeof(float)) return;
      Floats<kAdd, kProbe>(carry, dst++, 1, lanes);
      carried = 0;
    }
    const size_t n = left / sizeof(float);
    Floats<kAdd, kProbe>(p, dst, n, lanes);
    dst += n;
    p += n * sizeof(float);
    left -= n * sizeof(float);
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

}  // namespace shardline
