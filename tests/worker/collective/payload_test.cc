// Reading received floats in place: results do not depend on how the
// payload is cut into pieces, and the probe flags a NaN or an infinity
// wherever it sits (in a vectorised block, in the tail, split across two
// pieces) and nothing else.
#include "worker/collective/payload.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "common/encoding/bf16.h"

namespace shardline {
namespace {

// The bytes cut into pieces of `piece` bytes (the last may be shorter).
class CutPayload : public Payload {
 public:
  CutPayload(std::string bytes, size_t piece) : Payload(bytes.size()), bytes_(std::move(bytes)), piece_(piece) {}
  size_t size() const override { return bytes_.size(); }
  void ForEachPiece(const std::function<void(absl::Span<const char>)>& fn) const override {
    for (size_t at = 0; at < bytes_.size(); at += piece_) {
      fn(absl::Span<const char>(bytes_.data() + at, std::min(piece_, bytes_.size() - at)));
    }
  }

 private:
  std::string bytes_;
  size_t piece_;
};

std::string BytesOf(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

std::vector<float> Values(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i % 13) - 6.0f;
  return v;
}

TEST(PayloadTest, AddAndCopyAreExactForEveryCut) {
  for (size_t n : {0, 1, 7, 8, 9, 33, 100}) {
    for (size_t piece : {1, 3, 4, 5, 32, 1000}) {
      SCOPED_TRACE("n " + std::to_string(n) + " piece " + std::to_string(piece));
      const std::vector<float> in = Values(n);
      const CutPayload p(BytesOf(in), piece);
      std::vector<float> sum(n, 0.5f), copy(n, -1.0f);
      bool nonfinite = false;
      ASSERT_TRUE(AddFloatsInto(p, absl::MakeSpan(sum), &nonfinite).ok());
      ASSERT_TRUE(CopyFloatsInto(p, absl::MakeSpan(copy), &nonfinite).ok());
      EXPECT_FALSE(nonfinite);
      EXPECT_EQ(copy, in);
      for (size_t i = 0; i < n; ++i) EXPECT_EQ(sum[i], in[i] + 0.5f);
      std::vector<float> plain(n, 0.5f);
      ASSERT_TRUE(AddPayloadInto(p, absl::MakeSpan(plain)).ok());
      EXPECT_EQ(plain, sum);
    }
  }
}

TEST(PayloadTest, TheProbeFindsEveryNonFiniteValueWhereverItIs) {
  const float kBad[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                        -std::numeric_limits<float>::infinity()};
  const size_t n = 37;  // four vectorised blocks of 8 and a tail of 5
  for (float bad : kBad) {
    for (size_t at = 0; at < n; ++at) {
      for (size_t piece : {3, 4, 6, 1000}) {  // 3 and 6 split floats across pieces
        SCOPED_TRACE("value " + std::to_string(bad) + " at " + std::to_string(at) + " piece " + std::to_string(piece));
        std::vector<float> in = Values(n);
        in[at] = bad;
        const CutPayload p(BytesOf(in), piece);
        std::vector<float> out(n, 0.0f);
        bool added = false, copied = false;
        ASSERT_TRUE(AddFloatsInto(p, absl::MakeSpan(out), &added).ok());
        ASSERT_TRUE(CopyFloatsInto(p, absl::MakeSpan(out), &copied).ok());
        EXPECT_TRUE(added);
        EXPECT_TRUE(copied);
        // Delivered as it came.
        EXPECT_EQ(std::memcmp(&out[at], &bad, sizeof(float)), 0);
      }
    }
  }
}

TEST(PayloadTest, HugeAndTinyFiniteValuesAreNotFlagged) {
  const std::vector<float> in = {std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
                                 std::numeric_limits<float>::denorm_min(), -0.0f, 0.0f,
                                 std::numeric_limits<float>::min(), 1e38f, -1e-38f, 3.0f};
  const CutPayload p(BytesOf(in), 5);
  std::vector<float> out(in.size(), 0.0f);
  bool nonfinite = false;
  ASSERT_TRUE(CopyFloatsInto(p, absl::MakeSpan(out), &nonfinite).ok());
  EXPECT_FALSE(nonfinite);
  // max + max overflows in the sum, but what arrived was finite.
  std::vector<float> sum(in.size(), 0.0f);
  sum[0] = std::numeric_limits<float>::max();
  ASSERT_TRUE(AddFloatsInto(p, absl::MakeSpan(sum), &nonfinite).ok());
  EXPECT_FALSE(nonfinite);
  EXPECT_TRUE(std::isinf(sum[0]));
}

TEST(PayloadTest, Bf16AddsWidenExactlyForEveryCutAndProbe) {
  for (size_t n : {0, 1, 7, 8, 9, 33, 100}) {
    for (size_t piece : {1, 2, 3, 5, 32, 1000}) {  // odd pieces split a value
      SCOPED_TRACE("n " + std::to_string(n) + " piece " + std::to_string(piece));
      std::vector<uint16_t> wire(n);
      for (size_t i = 0; i < n; ++i) wire[i] = FloatToBf16(static_cast<float>(i) * 0.37f - 9.0f);
      const CutPayload p(std::string(reinterpret_cast<const char*>(wire.data()), n * 2), piece);
      std::vector<float> sum(n, 0.25f);
      bool nonfinite = false;
      ASSERT_TRUE(AddBf16Into(p, absl::MakeSpan(sum), &nonfinite).ok());
      EXPECT_FALSE(nonfinite);
      for (size_t i = 0; i < n; ++i) EXPECT_EQ(sum[i], 0.25f + Bf16ToFloat(wire[i])) << i;
    }
  }
  // A non-finite bf16 anywhere is flagged; the size is in bf16s.
  std::vector<uint16_t> wire(37, FloatToBf16(1.5f));
  wire[36] = FloatToBf16(std::numeric_limits<float>::infinity());
  const CutPayload p(std::string(reinterpret_cast<const char*>(wire.data()), wire.size() * 2), 3);
  std::vector<float> out(37, 0.0f);
  bool nonfinite = false;
  ASSERT_TRUE(AddBf16Into(p, absl::MakeSpan(out), &nonfinite).ok());
  EXPECT_TRUE(nonfinite);
  std::vector<float> wrong(36);
  EXPECT_TRUE(absl::IsInternal(AddBf16Into(p, absl::MakeSpan(wrong), &nonfinite)));
}

TEST(PayloadTest, ASizeMismatchIsAnErrorNamingBothSizes) {
  const CutPayload p(std::string(12, '\0'), 4);
  std::vector<float> out(4);
  bool nonfinite = false;
  const absl::Status s = AddFloatsInto(p, absl::MakeSpan(out), &nonfinite);
  EXPECT_TRUE(absl::IsInternal(s)) << s;
  EXPECT_NE(s.message().find("12 bytes; expected 16"), absl::string_view::npos) << s;
}

}  // namespace
}  // namespace shardline
