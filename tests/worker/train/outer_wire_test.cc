// The pseudo-gradient's encodings across islands: bfloat16 is the nearest
// even rounding, int8 is within half a step of its block's scale, blocks of
// zeros stay zero, and what is not an encoding is refused, not read.
#include "worker/train/outer_wire.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "common/encoding/bf16.h"

namespace shardline {
namespace {

using Wire = config::DilocoConfig;

std::vector<float> Values(int n) {
  std::vector<float> v(static_cast<size_t>(n));
  uint32_t x = 12345;
  for (float& f : v) {
    x = x * 1664525u + 1013904223u;
    f = (static_cast<float>(x >> 8) / 16777216.0f - 0.5f) * 1e-2f;
  }
  return v;
}

TEST(OuterWireTest, Bf16IsTheNearestEvenRounding) {
  const std::vector<float> v = Values(3000);
  const std::string bytes = EncodeOuterWire(Wire::BF16, v);
  EXPECT_EQ(static_cast<int64_t>(bytes.size()), OuterWireBytes(Wire::BF16, 3000));
  EXPECT_EQ(bytes.size(), 6000u);
  std::vector<float> sum(v.size(), 1.0f);
  ASSERT_TRUE(AddDecodedOuterWire(Wire::BF16, bytes, absl::MakeSpan(sum)).ok());
  for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(sum[i], 1.0f + Bf16ToFloat(FloatToBf16(v[i]))) << i;
}

TEST(OuterWireTest, Int8IsWithinHalfAStepOfItsBlocksScale) {
  std::vector<float> v = Values(2 * static_cast<int>(kInt8Block) + 5);
  for (int64_t i = kInt8Block; i < 2 * kInt8Block; ++i) v[static_cast<size_t>(i)] = 0;  // a block of zeros
  v[7] = 0.5f;  // the first block's largest: its scale is 0.5 / 127
  const std::string bytes = EncodeOuterWire(Wire::INT8, v);
  EXPECT_EQ(static_cast<int64_t>(bytes.size()), static_cast<int64_t>(v.size()) + 3 * 4);
  std::vector<float> got(v.size(), 0.0f);
  ASSERT_TRUE(AddDecodedOuterWire(Wire::INT8, bytes, absl::MakeSpan(got)).ok());
  EXPECT_EQ(got[7], 0.5f);
  for (int64_t i = 0; i < kInt8Block; ++i) {
    EXPECT_LE(std::fabs(got[static_cast<size_t>(i)] - v[static_cast<size_t>(i)]), 0.5f / 127 / 2 * 1.0001f) << i;
  }
  for (int64_t i = kInt8Block; i < 2 * kInt8Block; ++i) EXPECT_EQ(got[static_cast<size_t>(i)], 0.0f);
  EXPECT_EQ(EncodeOuterWire(Wire::INT8, v), bytes) << "not a pure function of the values";
}

TEST(OuterWireTest, WhatIsNotAnEncodingIsRefused) {
  const std::vector<float> v = Values(100);
  std::vector<float> sum(v.size(), 0.0f);
  std::string bytes = EncodeOuterWire(Wire::INT8, v);
  EXPECT_EQ(AddDecodedOuterWire(Wire::INT8, bytes.substr(1), absl::MakeSpan(sum)).code(), absl::StatusCode::kDataLoss);
  const float nan = std::nanf("");
  std::memcpy(bytes.data(), &nan, sizeof(nan));
  EXPECT_EQ(AddDecodedOuterWire(Wire::INT8, bytes, absl::MakeSpan(sum)).code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(AddDecodedOuterWire(Wire::BF16, EncodeOuterWire(Wire::BF16, v) + "x", absl::MakeSpan(sum)).code(),
            absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace shardline
