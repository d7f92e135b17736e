#include "worker/collective/payload.h"

#include <cstring>

#include "absl/strings/str_cat.h"

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

absl::Status AddPayloadInto(const Payload& payload, absl::Span<float> out) {
  if (payload.size() != out.size() * sizeof(float)) {
    return SizeMismatch(payload.size(), out.size() * sizeof(float));
  }
  char carry[sizeof(float)];  // a float split across two pieces
  size_t carried = 0;
  float* dst = out.data();
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
      float v;
      std::memcpy(&v, carry, sizeof(v));
      *dst++ += v;
      carried = 0;
    }
    const size_t n = left / sizeof(float);
    for (size_t i = 0; i < n; ++i) {
      float v;
      std::memcpy(&v, p + i * sizeof(float), sizeof(v));  // pieces may be unaligned
      dst[i] += v;
    }
    dst += n;
    p += n * sizeof(float);
    left -= n * sizeof(float);
    std::memcpy(carry, p, left);
    carried = left;
  });
  return absl::OkStatus();
}

}  // namespace shardline
