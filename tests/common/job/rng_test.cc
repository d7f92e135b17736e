#include "common/job/rng.h"

#include <gtest/gtest.h>

#include <set>

namespace shardline {
namespace {

// Known-answer vectors from Random123's kat_vectors for philox4x32_10.
TEST(PhiloxTest, MatchesRandom123KnownAnswers) {
  EXPECT_EQ(Philox4x32({0, 0, 0, 0}, {0, 0}),
            (std::array<uint32_t, 4>{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(Philox4x32({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
            (std::array<uint32_t, 4>{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(Philox4x32({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
            (std::array<uint32_t, 4>{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(RandomStreamTest, DrawsArePureFunctionsOfTheirKey) {
  RandomStream a(42, Purpose::kShuffle, 7, 3);
  RandomStream b(42, Purpose::kShuffle, 7, 3);
  // Any order of access gives the same values.
  const uint32_t late = b.Bits(1000);
  EXPECT_EQ(a.Bits(0), b.Bits(0));
  EXPECT_EQ(a.Bits(1000), late);
}

TEST(RandomStreamTest, SeedStepRankAndPurposeAllSelectDistinctStreams) {
  std::set<uint32_t> firsts;
  firsts.insert(RandomStream(1, Purpose::kInit, 0, 0).Bits(0));
  firsts.insert(RandomStream(2, Purpose::kInit, 0, 0).Bits(0));
  firsts.insert(RandomStream(1, Purpose::kShuffle, 0, 0).Bits(0));
  firsts.insert(RandomStream(1, Purpose::kInit, 1, 0).Bits(0));
  firsts.insert(RandomStream(1, Purpose::kInit, 0, 1).Bits(0));
  firsts.insert(RandomStream(1, Purpose::kInit, uint64_t{1} << 40, 0).Bits(0));
  EXPECT_EQ(firsts.size(), 6u);
}

TEST(RandomStreamTest, UniformIsInUnitIntervalWithMeanNearHalf) {
  RandomStream r(9, Purpose::kInit, 0, 0);
  double sum = 0;
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    const float u = r.Uniform(static_cast<uint64_t>(i));
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    sum += u;
  }
  EXPECT_NEAR(sum / n, 0.5, 0.01);
}

TEST(RandomStreamTest, UniformIntStaysBelowBoundAndHitsEveryValue) {
  RandomStream r(5, Purpose::kShuffle, 0, 0);
  std::set<uint64_t> seen;
  for (uint64_t i = 0; i < 2000; ++i) {
    const uint64_t v = r.UniformInt(i, 7);
    ASSERT_LT(v, 7u);
    seen.insert(v);
  }
  EXPECT_EQ(seen.size(), 7u);
  EXPECT_EQ(r.UniformInt(3, 1), 0u);
}

}  // namespace
}  // namespace shardline
