#include "worker/train/outer_wire.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/encoding/bf16.h"

namespace shardline {
namespace {

int64_t Blocks(int64_t n) { return (n + kInt8Block - 1) / kInt8Block; }

}  // namespace

int64_t OuterWireBytes(config::DilocoConfig::Wire wire, int64_t n) {
  if (wire == config::DilocoConfig::BF16) return 2 * n;
  return n + Blocks(n) * static_cast<int64_t>(sizeof(float));
}

std::string EncodeOuterWire(config::DilocoConfig::Wire wire, absl::Span<const float> values) {
  const int64_t n = static_cast<int64_t>(values.size());
  std::string out(static_cast<size_t>(OuterWireBytes(wire, n)), '\0');
  char* p = out.data();
  if (wire == config::DilocoConfig::BF16) {
    for (int64_t i = 0; i < n; ++i) {
      const uint16_t h = FloatToBf16(values[static_cast<size_t>(i)]);
      std::memcpy(p + 2 * i, &h, 2);
    }
    return out;
  }
  for (int64_t b = 0; b < Blocks(n); ++b) {
    const int64_t begin = b * kInt8Block, end = std::min(n, begin + kInt8Block);
    float most = 0;
    for (int64_t i = begin; i < end; ++i) most = std::max(most, std::fabs(values[static_cast<size_t>(i)]));
    const float scale = most / 127.0f;
    std::memcpy(p, &scale, sizeof(scale));
    p += sizeof(scale);
    const float inv = scale > 0 ? 1.0f / scale : 0.0f;
    for (int64_t i = begin; i < end; ++i) {
      const float q = std::nearbyint(values[static_cast<size_t>(i)] * inv);
      *p++ = static_cast<char>(static_cast<int8_t>(std::clamp(q, -127.0f, 127.0f)));
    }
  }
  return out;
}

absl::Status AddDecodedOuterWire(config::DilocoConfig::Wire wire, absl::string_view bytes, absl::Span<float> sum) {
  const int64_t n = static_cast<int64_t>(sum.size());
  if (static_cast<int64_t>(bytes.size()) != OuterWireBytes(wire, n)) {
    return absl::DataLossError(absl::StrCat("a pseudo-gradient of ", bytes.size(), " bytes for ", n,
                                            " values; expected ", OuterWireBytes(wire, n)));
  }
  const char* p = bytes.data();
  if (wire == config::DilocoConfig::BF16) {
    for (int64_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      sum[static_cast<size_t>(i)] += Bf16ToFloat(h);
    }
    return absl::OkStatus();
  }
  for (int64_t b = 0; b < Blocks(n); ++b) {
    const int64_t begin = b * kInt8Block, end = std::min(n, begin + kInt8Block);
    float scale;
    std::memcpy(&scale, p, sizeof(scale));
    p += sizeof(scale);
    if (!std::isfinite(scale) || scale < 0) {
      return absl::DataLossError(absl::StrCat("a pseudo-gradient block ", b, " has the scale ", scale));
    }
    for (int64_t i = begin; i < end; ++i) {
      sum[static_cast<size_t>(i)] += static_cast<float>(static_cast<int8_t>(*p++)) * scale;
    }
  }
  return absl::OkStatus();
}

}  // namespace shardline
