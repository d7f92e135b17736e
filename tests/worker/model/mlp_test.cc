#include "worker/model/mlp.h"

#include <gtest/gtest.h>

#include <cmath>

#include "common/job/rng.h"
#include "tests/worker/model/model_test_util.h"

namespace shardline {
namespace {

class GradientCheckTest : public ::testing::TestWithParam<config::Activation> {};

// Every analytic gradient entry matches a central finite difference of the
// scaled loss. Where a ReLU kink lies within +-eps of the point (the left and
// right one-sided differences disagree) the central difference means
// nothing, so such entries are skipped; nearly all must be checked.
TEST_P(GradientCheckTest, MatchesFiniteDifferences) {
  const Mlp mlp({5, {7, 6}, 4, GetParam()});
  const Problem prob = RandomProblem(6, 5, 4, 1);
  const std::vector<float> params = InitParams(mlp, 3);
  const size_t checked = CheckGradients(mlp, prob, params, "mlp", 0.05, 2e-3);
  EXPECT_GE(checked, params.size() * 95 / 100);
  if (GetParam() == config::TANH) {
    EXPECT_EQ(checked, params.size());  // smooth: nothing skipped
  }
}

TEST(MlpTest, LayerHooksAnnounceEveryLayerInPassOrder) {
  const Mlp mlp({5, {7, 6}, 4, config::RELU});
  CheckLayerHooks(mlp, RandomProblem(6, 5, 4, 1), InitParams(mlp, 3));
}

TEST(MlpTest, Bfloat16IsNearFloat32AndKeepsTheHooksContract) {
  SHARDLINE_REQUIRE_BF16();
  // Tanh: smooth, so bfloat16's rounding flips no ReLU and the gradients
  // differ by rounding alone.
  const Mlp fp32({50, {70, 60}, 10, config::TANH});
  const Mlp bf16({50, {70, 60}, 10, config::TANH, Precision::kBfloat16});
  const std::vector<float> params = InitParams(fp32, 3);
  CheckBfloatIsNearFloat(fp32, bf16, RandomProblem(16, 50, 10, 1), params);
  CheckLayerHooks(bf16, RandomProblem(6, 50, 10, 1), params);
  CheckRoundingOnceGivesTheSameBits(bf16, RandomProblem(6, 50, 10, 1), params);
}

INSTANTIATE_TEST_SUITE_P(Activations, GradientCheckTest,
                         ::testing::Values(config::RELU, config::TANH));

TEST(MlpTest, LayoutIsNamedContiguousAndInLayerOrder) {
  const Mlp mlp({784, {256, 128}, 10, config::RELU});
  const auto& t = mlp.layout().tensors();
  ASSERT_EQ(t.size(), 6u);
  EXPECT_EQ(t[0].name, "layer0/w");
  EXPECT_EQ(t[0].shape, (std::vector<int64_t>{784, 256}));
  EXPECT_EQ(t[1].name, "layer0/b");
  EXPECT_EQ(t[1].offset, 784 * 256);
  EXPECT_EQ(t[5].name, "layer2/b");
  EXPECT_EQ(mlp.layout().total_size(), 784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10);
  // forward + weight-gradient everywhere, input-gradient for layers 1 and 2.
  EXPECT_EQ(mlp.TrainFlopsPerExample(), 4 * 784 * 256 + 6 * (256 * 128 + 128 * 10));
}

TEST(MlpTest, InitOfAnyRangeEqualsTheSameSliceOfTheWhole) {
  const Mlp mlp({50, {30}, 10, config::RELU});
  const int64_t total = mlp.layout().total_size();
  std::vector<float> whole(static_cast<size_t>(total));
  mlp.InitRange(5, Range{0, total}, whole.data());
  for (int world : {2, 3, 7}) {
    for (int r = 0; r < world; ++r) {
      const Range shard = ShardRange(total, r, world);
      std::vector<float> part(static_cast<size_t>(shard.size()));
      mlp.InitRange(5, shard, part.data());
      EXPECT_TRUE(std::equal(part.begin(), part.end(), whole.begin() + shard.begin));
    }
  }
  // He-uniform bound for the first weight matrix; zero biases.
  const float bound = std::sqrt(6.0f / 50);
  for (int64_t i = 0; i < 50 * 30; ++i) EXPECT_LE(std::fabs(whole[static_cast<size_t>(i)]), bound);
  EXPECT_EQ(whole[50 * 30], 0.0f);
}

TEST(MlpTest, AccumulateAddsToExistingGradients) {
  const Mlp mlp({5, {4}, 3, config::RELU});
  const Problem a = RandomProblem(4, 5, 3, 10), b = RandomProblem(4, 5, 3, 11);
  std::vector<float> params = InitParams(mlp, 1);
  std::vector<float> ga(params.size()), gb(params.size()), gab(params.size());
  MlpWorkspace ws(Precision::kFloat32);
  mlp.ForwardBackward(params.data(), Images(a.x.data(), a.y.data(), 4), 0.5f, false, ga.data(), &ws);
  mlp.ForwardBackward(params.data(), Images(b.x.data(), b.y.data(), 4), 0.5f, false, gb.data(), &ws);
  mlp.ForwardBackward(params.data(), Images(a.x.data(), a.y.data(), 4), 0.5f, false, gab.data(), &ws);
  mlp.ForwardBackward(params.data(), Images(b.x.data(), b.y.data(), 4), 0.5f, true, gab.data(), &ws);
  for (size_t i = 0; i < params.size(); ++i) EXPECT_NEAR(gab[i], ga[i] + gb[i], 1e-6);
}

TEST(MlpTest, EvaluateCountsCorrectPredictions) {
  // One layer with identity-like weights: the argmax is the largest input.
  const Mlp mlp({3, {3}, 3, config::RELU});
  std::vector<float> params(static_cast<size_t>(mlp.layout().total_size()), 0.0f);
  for (int layer = 0; layer < 2; ++layer) {
    const TensorInfo& w = mlp.layout().tensor(2 * layer);
    for (int i = 0; i < 3; ++i) params[static_cast<size_t>(w.offset + i * 3 + i)] = 1.0f;
  }
  const std::vector<float> x = {3, 1, 0, 0, 2, 1, 1, 0, 5};
  const std::vector<int32_t> y = {0, 1, 1};
  MlpWorkspace ws(Precision::kFloat32);
  const BatchStats s = mlp.Evaluate(params.data(), Images(x.data(), y.data(), 3), &ws);
  EXPECT_EQ(s.count, 3);
  EXPECT_EQ(s.correct, 2);
  EXPECT_GT(s.loss_sum, 0);
}

}  // namespace
}  // namespace shardline
