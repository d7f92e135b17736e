#include "worker/optim/optimizer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <cstring>

#include "common/job/rng.h"
#include "worker/model/bucket_plan.h"
#include "worker/optim/lr_schedule.h"

namespace shardline {
namespace {

FlatLayout TestLayout() {
  FlatLayout layout;
  layout.Add("layer0/w", {13, 7});
  layout.Add("layer0/b", {7});
  layout.Add("layer1/w", {7, 5});
  layout.Add("layer1/b", {5});
  return layout;
}

std::vector<float> RandomVector(int64_t n, uint64_t step) {
  RandomStream rng(99, Purpose::kDropout, step, 0);
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = rng.Uniform(static_cast<uint64_t>(i)) - 0.5f;
  return v;
}

config::OptimizerConfig Sgd(bool nesterov, float wd) {
  config::OptimizerConfig c;
  c.mutable_sgd()->set_momentum(0.9f);
  c.mutable_sgd()->set_nesterov(nesterov);
  c.mutable_sgd()->set_weight_decay(wd);
  return c;
}

config::OptimizerConfig AdamW() {
  config::OptimizerConfig c;
  c.mutable_adamw()->set_weight_decay(0.01f);
  return c;
}

class ShardedUpdateTest : public ::testing::TestWithParam<config::OptimizerConfig> {};

// The ZeRO contract: N optimizers, each updating its own pieces, produce
// bitwise the parameters and state of one optimizer updating everything,
// whether or not the update norm is computed (a different, scalar loop),
// for one bucket (one contiguous piece per rank) or one per layer (a piece
// of every layer per rank), updated whole or bucket by bucket.
TEST_P(ShardedUpdateTest, UpdatingInPiecesIsBitwiseEqualToUpdatingWhole) {
  const FlatLayout layout = TestLayout();
  const int64_t total = layout.total_size();
  for (const int64_t cap : {int64_t{0}, int64_t{40}}) {
    const std::vector<Range> buckets = BucketPlan(layout, cap);
    for (int world = 2; world <= 7; ++world) {
      SCOPED_TRACE(testing::Message() << buckets.size() << " buckets, world " << world);
      std::vector<float> whole = RandomVector(total, 1000), sharded = whole;
      auto single = *Optimizer::Create(GetParam(), layout, {Range{0, total}});
      std::vector<std::unique_ptr<Optimizer>> parts;
      for (int r = 0; r < world; ++r) {
        parts.push_back(*Optimizer::Create(GetParam(), layout, OwnedPieces(buckets, r, world)));
      }
      for (int64_t t = 1; t <= 5; ++t) {
        const std::vector<float> grads = RandomVector(total, static_cast<uint64_t>(t));
        const float lr = 0.1f / static_cast<float>(t), scale = 0.7f;
        single->Update(UpdateStep{t, lr, scale}, whole.data(), grads.data(), /*want_update_sq=*/true);
        for (auto& opt : parts) {
          if (t % 2 == 0) {
            opt->Update(UpdateStep{t, lr, scale}, sharded.data(), grads.data(), /*want_update_sq=*/true);
          } else {
            for (const Range& bucket : buckets) {
              opt->Update(UpdateStep{t, lr, scale}, sharded.data(), grads.data(), /*want_update_sq=*/false, bucket);
            }
          }
        }
      }
      ASSERT_EQ(std::memcmp(whole.data(), sharded.data(), whole.size() * sizeof(float)), 0);
      // Each rank's packed state holds its pieces' elements in order.
      for (size_t b = 0; b < single->state().size(); ++b) {
        const std::vector<float>& ref = single->state()[b]->values;
        std::vector<float> placed(ref.size(), -1.0f);
        for (auto& opt : parts) {
          EXPECT_EQ(static_cast<int64_t>(opt->state()[b]->values.size()), opt->size());
          for (const PieceCopy& run : SharedRuns(opt->pieces(), {Range{0, total}})) {
            std::copy_n(opt->state()[b]->values.begin() + run.from, run.size, placed.begin() + run.flat);
          }
        }
        EXPECT_EQ(std::memcmp(placed.data(), ref.data(), ref.size() * sizeof(float)), 0) << single->state()[b]->name;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Optimizers, ShardedUpdateTest,
                         ::testing::Values(Sgd(false, 0), Sgd(true, 0.01f), AdamW()));

TEST(OptimizerTest, SgdMomentumMatchesTheFormula) {
  FlatLayout layout;
  layout.Add("w", {1, 2});
  auto opt = *Optimizer::Create(Sgd(false, 0.5f), layout, {Range{0, 2}});
  std::vector<float> p = {1.0f, -2.0f};
  const std::vector<float> g = {0.5f, 1.0f};
  opt->Update(UpdateStep{1, 0.1f, 1.0f}, p.data(), g.data());  // v = g; p -= lr (v + wd p)
  EXPECT_FLOAT_EQ(p[0], 1.0f - 0.1f * (0.5f + 0.5f * 1.0f));
  opt->Update(UpdateStep{2, 0.1f, 1.0f}, p.data(), g.data());  // v = 0.9 * 0.5 + 0.5
  EXPECT_FLOAT_EQ(p[0], 0.9f - 0.1f * (0.95f + 0.5f * 0.9f));
}

TEST(OptimizerTest, AdamWFirstStepMovesBySignTimesLr) {
  FlatLayout layout;
  layout.Add("b", {3});  // a bias: no weight decay
  auto opt = *Optimizer::Create(AdamW(), layout, {Range{0, 3}});
  std::vector<float> p = {0, 0, 0};
  const std::vector<float> g = {2.0f, -0.001f, 0.3f};
  opt->Update(UpdateStep{1, 0.01f, 1.0f}, p.data(), g.data());
  EXPECT_NEAR(p[0], -0.01f, 1e-6);
  EXPECT_NEAR(p[1], 0.01f, 1e-4);
  EXPECT_NEAR(p[2], -0.01f, 1e-6);
}

TEST(OptimizerTest, WeightDecaySkipsBiases) {
  FlatLayout layout;
  layout.Add("w", {1, 1});
  layout.Add("b", {1});
  auto opt = *Optimizer::Create(Sgd(false, 0.1f), layout, {Range{0, 2}});
  std::vector<float> p = {1.0f, 1.0f};
  const std::vector<float> g = {0.0f, 0.0f};
  opt->Update(UpdateStep{1, 1.0f, 1.0f}, p.data(), g.data());
  EXPECT_FLOAT_EQ(p[0], 0.9f);
  EXPECT_FLOAT_EQ(p[1], 1.0f);
}

TEST(OptimizerTest, PiecesOutsideTheLayoutOrOutOfOrderAreRejected) {
  EXPECT_FALSE(Optimizer::Create(Sgd(false, 0), TestLayout(), {Range{0, 100000}}).ok());
  EXPECT_FALSE(Optimizer::Create(Sgd(false, 0), TestLayout(), {Range{10, 20}, Range{5, 8}}).ok());
  EXPECT_FALSE(Optimizer::Create(Sgd(false, 0), TestLayout(), {Range{10, 20}, Range{15, 30}}).ok());
  EXPECT_TRUE(Optimizer::Create(Sgd(false, 0), TestLayout(), {Range{0, 3}, Range{50, 60}}).ok());
}

TEST(LrScheduleTest, WarmupThenCosineToEnd) {
  config::ScheduleConfig c;
  c.set_base_lr(1.0f);
  c.set_warmup_steps(10);
  c.set_decay(config::COSINE);
  c.set_end_lr_ratio(0.1f);
  LrSchedule lr(c, 110);
  EXPECT_FLOAT_EQ(lr(0), 0.1f);
  EXPECT_FLOAT_EQ(lr(9), 1.0f);
  EXPECT_FLOAT_EQ(lr(10), 1.0f);
  EXPECT_NEAR(lr(10 + 99 / 2.0), 0.55, 0.02);
  EXPECT_FLOAT_EQ(lr(109), 0.1f);
}

TEST(LrScheduleTest, LinearAndConstant) {
  config::ScheduleConfig c;
  c.set_base_lr(2.0f);
  c.set_decay(config::LINEAR);
  LrSchedule linear(c, 101);
  EXPECT_FLOAT_EQ(linear(0), 2.0f);
  EXPECT_FLOAT_EQ(linear(50), 1.0f);
  EXPECT_FLOAT_EQ(linear(100), 0.0f);
  c.set_decay(config::CONSTANT);
  LrSchedule constant(c, 101);
  EXPECT_FLOAT_EQ(constant(77), 2.0f);
}

}  // namespace
}  // namespace shardline
