#include "common/job/float_hash.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "common/faults/corruption.h"

namespace shardline {
namespace {

std::vector<float> Ramp(int n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = 0.001f * static_cast<float>(i) - 0.3f;
  return v;
}

TEST(FloatHashTest, AddedInAnyPiecesTheSameAsAtOnce) {
  const std::vector<float> v = Ramp(1003);  // not a whole number of blocks
  const uint64_t whole = HashFloats(v);
  for (int cut : {0, 1, 7, 8, 9, 500, 1002, 1003}) {
    FloatHasher h;
    h.Add(v.data(), cut);
    h.Add(v.data() + cut, 1003 - cut);
    EXPECT_EQ(h.Digest(), whole) << "cut at " << cut;
  }
  FloatHasher one_by_one;
  for (float f : v) one_by_one.Add(&f, 1);
  EXPECT_EQ(one_by_one.Digest(), whole);
}

// Pinned: the hash is compared across hosts and CPUs (the copies built per
// ISA must agree with each other and with every earlier build); a change
// here is a change of the wire's meaning.
TEST(FloatHashTest, APinnedValue) {
  EXPECT_EQ(HashFloats(Ramp(1003)), 0x98eac70de225473full) << std::hex << HashFloats(Ramp(1003));
  EXPECT_NE(HashFloats({}), HashFloats(std::vector<float>{0.0f}));  // the count is in it
}

TEST(FloatHashTest, EverySingleBitFlipChangesTheDigest) {
  const std::vector<float> v = Ramp(67);
  const uint64_t clean = HashFloats(v);
  for (size_t i = 0; i < v.size(); ++i) {
    for (int bit = 0; bit < 32; ++bit) {
      std::vector<float> w = v;
      FlipFloatBit(&w[i], bit);
      ASSERT_NE(HashFloats(w), clean) << "value " << i << " bit " << bit;
    }
  }
}

TEST(FloatHashTest, TwoSignFlipsInOneLaneDoNotCancel) {
  // A lane step without rotation would keep a top-bit difference in the top
  // bit, and a second one would undo it.
  std::vector<float> v = Ramp(64);
  const uint64_t clean = HashFloats(v);
  FlipFloatBit(&v[3], 31);
  FlipFloatBit(&v[11], 31);  // the same lane (3 + 8)
  EXPECT_NE(HashFloats(v), clean);
}

TEST(FloatHashTest, BitsNotValuesMinusZeroAndZeroDiffer) {
  EXPECT_NE(HashFloats(std::vector<float>{0.0f}), HashFloats(std::vector<float>{-0.0f}));
}

}  // namespace
}  // namespace shardline
