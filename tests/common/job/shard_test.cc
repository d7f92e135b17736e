#include "common/job/shard.h"

#include <gtest/gtest.h>

#include <vector>

namespace shardline {
namespace {

// Every element of every bucket is owned by exactly one rank, the owner of
// its bucket's chunk: the pieces of all ranks tile the buffer.
TEST(ShardTest, OwnedPiecesAreEachRanksChunkOfEveryBucket) {
  const std::vector<Range> buckets = {{0, 10}, {10, 13}, {13, 40}};
  EXPECT_EQ(OwnedPieces(buckets, 0, 2), (std::vector<Range>{{0, 5}, {10, 11}, {13, 26}}));
  EXPECT_EQ(OwnedPieces(buckets, 1, 2), (std::vector<Range>{{5, 10}, {11, 13}, {26, 40}}));
  // One bucket: today's contiguous shard.
  EXPECT_EQ(OwnedPieces({Range{0, 40}}, 2, 3), (std::vector<Range>{ShardRange(40, 2, 3)}));
  for (int world = 1; world <= 8; ++world) {
    std::vector<int> owners(40, 0);
    for (int r = 0; r < world; ++r) {
      for (const Range& p : OwnedPieces(buckets, r, world)) {
        ASSERT_FALSE(p.empty());  // empty chunks are left out
        for (int64_t i = p.begin; i < p.end; ++i) ++owners[static_cast<size_t>(i)];
      }
    }
    EXPECT_EQ(owners, std::vector<int>(40, 1)) << "world " << world;
  }
  EXPECT_EQ(PiecesSize(OwnedPieces(buckets, 1, 2)), 5 + 2 + 14);
}

TEST(ShardTest, SharedRunsMapPackedOffsetsBothWays) {
  // from packs [2,6) then [10,14); to packs [0,3), [5,11), [13,20).
  const std::vector<Range> from = {{2, 6}, {10, 14}};
  const std::vector<Range> to = {{0, 3}, {5, 11}, {13, 20}};
  const std::vector<PieceCopy> runs = SharedRuns(from, to);
  ASSERT_EQ(runs.size(), 4u);
  auto eq = [](const PieceCopy& c, int64_t flat, int64_t f, int64_t t, int64_t n) {
    return c.flat == flat && c.from == f && c.to == t && c.size == n;
  };
  EXPECT_TRUE(eq(runs[0], 2, 0, 2, 1));   // [2,3): from 0, to 2
  EXPECT_TRUE(eq(runs[1], 5, 3, 3, 1));   // [5,6): from 3, to 3
  EXPECT_TRUE(eq(runs[2], 10, 4, 8, 1));  // [10,11): from 4, to 3+5
  EXPECT_TRUE(eq(runs[3], 13, 7, 9, 1));  // [13,14): from 7, to 9
  EXPECT_TRUE(SharedRuns(from, {Range{6, 10}}).empty());
  // Against the whole buffer, the runs are the pieces themselves.
  const std::vector<PieceCopy> whole = SharedRuns(from, {Range{0, 20}});
  ASSERT_EQ(whole.size(), 2u);
  EXPECT_TRUE(eq(whole[0], 2, 0, 2, 4));
  EXPECT_TRUE(eq(whole[1], 10, 4, 10, 4));
}

}  // namespace
}  // namespace shardline
