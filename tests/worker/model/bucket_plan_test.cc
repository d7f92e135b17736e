#include "worker/model/bucket_plan.h"

#include <gtest/gtest.h>

#include <vector>

namespace shardline {
namespace {

FlatLayout FourLayers() {
  FlatLayout layout;
  layout.Add("a/w", {10, 10});  // [0, 100)   layer a: [0, 110)
  layout.Add("a/b", {10});      // [100, 110)
  layout.Add("b/w", {10, 3});   // [110, 140) layer b: [110, 143)
  layout.Add("b/b", {3});       // [140, 143)
  layout.Add("c/w", {3, 300});  // [143, 1043) layer c: a layer above any small cap
  layout.Add("d/w", {20});      // [1043, 1063)
  return layout;
}

TEST(BucketPlanTest, PacksWholeLayersFromTheLastWithinTheCap) {
  const FlatLayout layout = FourLayers();
  // From the end: d (20) alone as c does not fit; c (900) alone; then b + a (143).
  EXPECT_EQ(BucketPlan(layout, 150), (std::vector<Range>{{0, 143}, {143, 1043}, {1043, 1063}}));
  // A cap below every layer: one bucket per layer.
  EXPECT_EQ(BucketPlan(layout, 1), (std::vector<Range>{{0, 110}, {110, 143}, {143, 1043}, {1043, 1063}}));
  // d + c fit in 920; b does not join them.
  EXPECT_EQ(BucketPlan(layout, 920), (std::vector<Range>{{0, 143}, {143, 1063}}));
  // No cap, or one at least the model: one bucket.
  EXPECT_EQ(BucketPlan(layout, 0), (std::vector<Range>{{0, 1063}}));
  EXPECT_EQ(BucketPlan(layout, 1063), (std::vector<Range>{{0, 1063}}));
  EXPECT_TRUE(BucketPlan(FlatLayout(), 10).empty());
}

TEST(BucketPlanTest, BucketsTileTheBufferAtLayerBoundaries) {
  const FlatLayout layout = FourLayers();
  for (int64_t cap = 1; cap <= 1100; cap += 7) {
    const std::vector<Range> buckets = BucketPlan(layout, cap);
    int64_t at = 0;
    for (const Range& b : buckets) {
      EXPECT_EQ(b.begin, at) << "cap " << cap;
      EXPECT_TRUE(b.begin == 0 || b.begin == 110 || b.begin == 143 || b.begin == 1043) << "cap " << cap;
      at = b.end;
    }
    EXPECT_EQ(at, 1063) << "cap " << cap;
  }
  EXPECT_EQ(BucketCapFloats(1.0), 262144);
}

}  // namespace
}  // namespace shardline
