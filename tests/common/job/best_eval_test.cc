#include "common/job/best_eval.h"

#include <gtest/gtest.h>

#include <vector>

namespace shardline {
namespace {

config::CheckpointConfig Policy(const std::string& metric, config::BestMode mode) {
  config::CheckpointConfig p;
  if (!metric.empty()) p.set_best_metric(metric);
  p.set_best_mode(mode);
  return p;
}

// Evals (loss, accuracy) at steps 100, 200, 300, 400: which are new bests.
TEST(BestEvalTest, OneRuleForEveryMetricAndMode) {
  const std::vector<EvalValues> evals = {{0.50, 0.80}, {0.40, 0.79}, {0.45, 0.85}, {0.40, 0.85}};
  struct Case {
    std::string metric;
    config::BestMode mode;
    std::vector<bool> best;
    int64_t final_step;
  };
  const std::vector<Case> cases = {
      // No metric: accuracy, higher is better, whatever the mode says (the
      // coordinator's "best eval" and the worker's saved best agree).
      {"", config::MAX, {true, false, true, false}, 300},
      {"", config::MIN, {true, false, true, false}, 300},
      {"accuracy", config::MAX, {true, false, true, false}, 300},
      {"accuracy", config::MIN, {true, true, false, false}, 200},
      {"loss", config::MIN, {true, true, false, false}, 200},  // a tie (0.40 at 400) is not a new best
      {"loss", config::MAX, {true, false, false, false}, 100},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.metric + (c.mode == config::MAX ? " MAX" : " MIN"));
    BestEval best(Policy(c.metric, c.mode));
    EXPECT_EQ(best.step(), -1);
    for (size_t i = 0; i < evals.size(); ++i) {
      EXPECT_EQ(best.Offer(static_cast<int64_t>(100 * (i + 1)), evals[i]), c.best[i]) << "eval " << i;
    }
    EXPECT_EQ(best.step(), c.final_step);
  }
}

TEST(BestEvalTest, ContinuesFromASavedBest) {
  BestEval best(Policy("loss", config::MIN));
  best.Reset(500, 0.30);
  EXPECT_FALSE(best.Offer(600, {0.35, 0.9}));
  EXPECT_EQ(best.step(), 500);
  EXPECT_TRUE(best.Offer(700, {0.25, 0.9}));
  EXPECT_EQ(best.step(), 700);
  EXPECT_DOUBLE_EQ(best.value(), 0.25);
}

}  // namespace
}  // namespace shardline
