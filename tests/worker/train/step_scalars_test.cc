#include "worker/train/step_scalars.h"

#include <gtest/gtest.h>

#include "worker/train/train_step.h"

namespace shardline {
namespace {

// Two ranks' scalars reduced as the all-reduce does, op by op.
StepScalars Reduce(const StepScalars& a, const StepScalars& b) {
  std::array<double, StepScalars::kCount> x = a.Pack(), y = b.Pack();
  for (int i = 0; i < StepScalars::kCount; ++i) {
    switch (StepScalars::kOps[i]) {
      case ReduceOp::kSum: x[i] += y[i]; break;
      case ReduceOp::kMin: x[i] = std::min(x[i], y[i]); break;
      case ReduceOp::kMax: x[i] = std::max(x[i], y[i]); break;
    }
  }
  return StepScalars::Unpack(x);
}

TEST(StepScalarsTest, SumsTheLossAndNormTheSmallestVoteWinsAndAnyNonFiniteFlagIsSeen) {
  StepScalars a{1.5, 4.0, /*stop=*/kNoStep, /*checkpoint=*/300, /*eval=*/kNoStep, false};
  StepScalars b{2.5, 5.0, /*stop=*/120, /*checkpoint=*/310, /*eval=*/kNoStep, true};
  const StepScalars r = Reduce(a, b);
  EXPECT_EQ(r.loss_sum, 4.0);
  EXPECT_EQ(r.grad_sq, 9.0);
  EXPECT_EQ(r.stop_vote, 120);        // a vote beats no vote
  EXPECT_EQ(r.checkpoint_vote, 300);  // the earlier of two
  EXPECT_EQ(r.eval_vote, kNoStep);    // nobody asked
  EXPECT_TRUE(r.nonfinite_seen);
  EXPECT_FALSE(Reduce(a, a).nonfinite_seen);
}

TEST(StepScalarsTest, PackedInTheOrderTheWireHasAlwaysUsed) {
  const StepScalars s{1, 2, 3, kNoStep, 5, true};
  const std::array<double, StepScalars::kCount> p = s.Pack();
  EXPECT_EQ(p[0], 1);
  EXPECT_EQ(p[1], 2);
  EXPECT_EQ(p[2], 3);
  EXPECT_EQ(p[3], 9007199254740992.0);  // no vote: larger than any step, and finite
  EXPECT_EQ(p[4], 5);
  EXPECT_EQ(p[5], 1);
}

}  // namespace
}  // namespace shardline
