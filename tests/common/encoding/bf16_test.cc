// bfloat16 rounding (bf16.h): to nearest, ties to even, on the float's bits;
// infinities and NaNs kept; the vector path equal to the scalar one.
#include "absl/base/casts.h"
#include "common/encoding/bf16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace shardline {
namespace {

float FromBits(uint32_t u) { return absl::bit_cast<float>(u); }

TEST(Bf16Test, RoundsToNearestTiesToEven) {
  // 1.0 is 0x3F800000; one bf16 step above it is 0x3F810000.
  EXPECT_EQ(FloatToBf16(1.0f), 0x3F80);
  EXPECT_EQ(FloatToBf16(FromBits(0x3F807FFF)), 0x3F80);  // below half: down
  EXPECT_EQ(FloatToBf16(FromBits(0x3F808000)), 0x3F80);  // tie, even below: down
  EXPECT_EQ(FloatToBf16(FromBits(0x3F808001)), 0x3F81);  // above half: up
  EXPECT_EQ(FloatToBf16(FromBits(0x3F818000)), 0x3F82);  // tie, odd below: up to even
  EXPECT_EQ(FloatToBf16(-1.0f), 0xBF80);
  EXPECT_EQ(FloatToBf16(FromBits(0xBF818000)), 0xBF82);  // the sign does not change the rule
  EXPECT_EQ(FloatToBf16(0.0f), 0x0000);
  EXPECT_EQ(FloatToBf16(-0.0f), 0x8000);
  EXPECT_EQ(FloatToBf16(std::numeric_limits<float>::denorm_min()), 0x0000);
  // Exactly representable values come back unchanged.
  for (float v : {0.5f, -3.0f, 1024.0f, 0.15625f}) EXPECT_EQ(Bf16ToFloat(FloatToBf16(v)), v);
}

TEST(Bf16Test, KeepsInfinitiesAndNaNsAndOverflowsPastTheLargest) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(inf)), inf);
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(-inf)), -inf);
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(std::numeric_limits<float>::quiet_NaN()))));
  // A NaN whose payload is only in the low 16 bits must not become an infinity.
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(FromBits(0x7F800001)))));
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(FromBits(0xFF80FFFF)))));
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(std::numeric_limits<float>::max())), inf);
  EXPECT_TRUE(std::isfinite(Bf16ToFloat(FloatToBf16(FromBits(0x7F7F7FFF)))));
}

TEST(Bf16Test, TheRelativeErrorIsAtMostHalfAStep) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  for (int i = 0; i < 100000; ++i) {
    const float v = normal(rng) * std::exp2(static_cast<float>(i % 60 - 30));
    const float r = Bf16ToFloat(FloatToBf16(v));
    EXPECT_LE(std::fabs(r - v), std::fabs(v) * std::exp2(-8.0f)) << v;
  }
}

TEST(Bf16Test, TheVectorPathGivesTheScalarBitsAtEveryLength) {
  std::mt19937 rng(11);
  for (size_t n : {0, 1, 3, 7, 8, 9, 15, 16, 17, 31, 33, 1000, 4099}) {
    std::vector<float> in(n);
    for (size_t i = 0; i < n; ++i) {
      in[i] = FromBits(static_cast<uint32_t>(rng()));  // every bit pattern: NaNs, infinities, ties
    }
    std::vector<uint16_t> out(n + 1, 0xABCD);
    RoundToBf16(in, out.data());
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], FloatToBf16(in[i])) << "n " << n << " i " << i;
    EXPECT_EQ(out[n], 0xABCD) << "wrote past the end";
  }
}

}  // namespace
}  // namespace shardline
