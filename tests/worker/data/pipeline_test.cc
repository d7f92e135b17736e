#include "worker/data/pipeline.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

namespace shardline {
namespace {

TEST(PipelineTest, ShuffleIsAPermutationThatDependsOnSeedAndEpoch) {
  const std::vector<int32_t> p = BatchPipeline::Shuffle(3, 0, 1000);
  std::vector<int32_t> sorted = p;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int32_t> iota(1000);
  std::iota(iota.begin(), iota.end(), 0);
  EXPECT_EQ(sorted, iota);
  EXPECT_NE(p, iota);
  EXPECT_EQ(p, BatchPipeline::Shuffle(3, 0, 1000));
  EXPECT_NE(p, BatchPipeline::Shuffle(3, 1, 1000));
  EXPECT_NE(p, BatchPipeline::Shuffle(4, 0, 1000));
}

TEST(PipelineTest, BatchOfAStepDoesNotDependOnWhatWasReadBefore) {
  BatchPipeline sequential(1000, 32, 7), jumped(1000, 32, 7);
  std::vector<int64_t> a, b;
  for (int64_t s = 0; s <= 70; ++s) sequential.GlobalBatch(s, &a);
  jumped.GlobalBatch(70, &b);  // epoch 2 directly
  EXPECT_EQ(a, b);
  jumped.GlobalBatch(3, &b);  // and back
  sequential.GlobalBatch(3, &a);
  EXPECT_EQ(a, b);
}

// The examples of the first epoch's batches, sorted.
std::vector<int64_t> FirstEpoch(BatchPipeline& pipe) {
  std::vector<int64_t> seen, batch;
  for (int64_t s = 0; s < pipe.steps_per_epoch(); ++s) {
    pipe.GlobalBatch(s, &batch);
    seen.insert(seen.end(), batch.begin(), batch.end());
  }
  std::sort(seen.begin(), seen.end());
  return seen;
}

TEST(PipelineTest, EachEpochVisitsDistinctExamplesAndDropsTheRemainder) {
  BatchPipeline pipe(1000, 32, 1);
  EXPECT_EQ(pipe.steps_per_epoch(), 31);
  const std::vector<int64_t> seen = FirstEpoch(pipe);
  EXPECT_EQ(std::adjacent_find(seen.begin(), seen.end()), seen.end());
  EXPECT_EQ(seen.size(), 992u);
}

TEST(PipelineTest, RankSlicesConcatenateToTheGlobalBatchForAnyWorldSize) {
  for (int batch : {120, 128, 7}) {
    BatchPipeline pipe(5000, batch, 11);
    for (int world : {1, 2, 3, 4, 5, 7, 8}) {
      if (world > batch) continue;
      std::vector<int64_t> global, joined, slice;
      pipe.GlobalBatch(17, &global);
      size_t smallest = SIZE_MAX, largest = 0;
      for (int r = 0; r < world; ++r) {
        pipe.RankSlice(17, r, world, &slice);
        smallest = std::min(smallest, slice.size());
        largest = std::max(largest, slice.size());
        joined.insert(joined.end(), slice.begin(), slice.end());
      }
      EXPECT_EQ(joined, global) << "batch " << batch << ", world " << world;
      EXPECT_LE(largest - smallest, 1u) << "batch " << batch << ", world " << world;
    }
  }
}

TEST(PipelineTest, PositionRoundTripsAndRejectsAnotherPipeline) {
  BatchPipeline pipe(1000, 32, 7);
  state::DataPosition pos;
  ASSERT_TRUE(pos.ParseFromString(pipe.Position(123).SerializeAsString()));
  absl::StatusOr<int64_t> next = pipe.Restore(pos);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(*next, 123);

  BatchPipeline other_seed(1000, 32, 8);
  absl::StatusOr<int64_t> bad = other_seed.Restore(pos);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("shuffle_seed 7"), absl::string_view::npos);
}

TEST(PipelineTest, GatherCopiesRowsAndLabels) {
  Dataset d;
  d.num_examples = 3;
  d.feature_dim = 2;
  d.num_classes = 3;
  d.pixels = {0, 1, 10, 11, 20, 21};
  d.labels = {0, 1, 2};
  BatchData b;
  const std::vector<int64_t> rows = {2, 0};
  ASSERT_TRUE(GatherBatch(d, rows, &b).ok());
  EXPECT_EQ(b.x, (std::vector<float>{20, 21, 0, 1}));
  EXPECT_EQ(b.y, (std::vector<int32_t>{2, 0}));
  EXPECT_TRUE(b.tokens.empty());
}

// kHashed: a bijection of [0, n) for every n, held nowhere, a pure
// function of (seed, epoch) as kStored is.
TEST(PipelineTest, TheHashedPermutationIsABijectionThatDependsOnSeedAndEpoch) {
  for (int64_t n : {1, 2, 3, 4, 5, 17, 1000, 4096, 4097, 65537}) {
    std::vector<int64_t> seen;
    for (int64_t i = 0; i < n; ++i) seen.push_back(BatchPipeline::HashedIndex(9, 2, n, i));
    std::vector<int64_t> sorted = seen;
    std::sort(sorted.begin(), sorted.end());
    std::vector<int64_t> iota(static_cast<size_t>(n));
    std::iota(iota.begin(), iota.end(), 0);
    ASSERT_EQ(sorted, iota) << n;
    if (n < 1000) continue;  // small ones may fix points or repeat by chance
    EXPECT_NE(seen, iota) << n;
    int moved = 0;
    for (int64_t i = 0; i < n; ++i) moved += BatchPipeline::HashedIndex(9, 3, n, i) != seen[static_cast<size_t>(i)];
    EXPECT_GT(moved, n / 2) << "another epoch, n " << n;
    moved = 0;
    for (int64_t i = 0; i < n; ++i) moved += BatchPipeline::HashedIndex(10, 2, n, i) != seen[static_cast<size_t>(i)];
    EXPECT_GT(moved, n / 2) << "another seed, n " << n;
  }
  // A corpus past 2^32 windows: positions land inside it, distinct.
  const int64_t huge = (int64_t{1} << 40) + 12345;
  std::vector<int64_t> some;
  for (int64_t i = 0; i < 2000; ++i) {
    some.push_back(BatchPipeline::HashedIndex(1, 0, huge, i * 7777777));
    ASSERT_LT(some.back(), huge);
    ASSERT_GE(some.back(), 0);
  }
  std::sort(some.begin(), some.end());
  EXPECT_EQ(std::unique(some.begin(), some.end()), some.end());
}

TEST(PipelineTest, HashedBatchesCoverAnEpochAndSliceForAnyWorldSize) {
  BatchPipeline pipe(1000, 32, 1, Permutation::kHashed);
  EXPECT_EQ(pipe.steps_per_epoch(), 31);
  const std::vector<int64_t> seen = FirstEpoch(pipe);
  EXPECT_EQ(std::adjacent_find(seen.begin(), seen.end()), seen.end());
  EXPECT_EQ(seen.size(), 992u);
  std::vector<int64_t> global, joined, slice;
  pipe.GlobalBatch(45, &global);
  for (int r = 0; r < 3; ++r) {
    pipe.RankSlice(45, r, 3, &slice);
    joined.insert(joined.end(), slice.begin(), slice.end());
  }
  EXPECT_EQ(joined, global);
  BatchPipeline stored(1000, 32, 1);
  stored.GlobalBatch(45, &slice);
  EXPECT_NE(slice, global);  // the two orders differ; each run keeps its own
}

// A position names its permutation, and a run drawing the other is refused
// rather than silently reading another order; positions written before it
// was recorded are read as those versions drew (token shards hashed, the
// rest stored).
TEST(PipelineTest, RestoreRefusesAPositionOfTheOtherPermutation) {
  BatchPipeline stored(1000, 32, 1), hashed(1000, 32, 1, Permutation::kHashed);
  EXPECT_EQ(stored.Restore(stored.Position(40)).value(), 40);
  EXPECT_EQ(hashed.Restore(hashed.Position(40)).value(), 40);
  const absl::StatusOr<int64_t> other = hashed.Restore(stored.Position(40));
  ASSERT_EQ(other.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(other.status().message().find("stored"), absl::string_view::npos) << other.status();
  EXPECT_FALSE(stored.Restore(hashed.Position(40)).ok());

  state::DataPosition old_bytes = stored.Position(40);
  old_bytes.clear_permutation();
  EXPECT_TRUE(stored.Restore(old_bytes).ok());
  EXPECT_FALSE(hashed.Restore(old_bytes).ok());  // text from before 2026-11-29: stored
  hashed.set_tokenizer_sha256("abc");
  state::DataPosition old_tokens = hashed.Position(40);
  old_tokens.clear_permutation();
  EXPECT_EQ(hashed.Restore(old_tokens).value(), 40);
}

TEST(PipelineTest, TextAndTokensAreHashedImagesStored) {
  Dataset images;
  EXPECT_EQ(PermutationFor(images), Permutation::kStored);
  Dataset text;
  text.context = 16;
  EXPECT_EQ(PermutationFor(text), Permutation::kHashed);
}

}  // namespace
}  // namespace shardline
