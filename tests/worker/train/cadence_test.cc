#include "worker/train/cadence.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace shardline {
namespace {

std::string Show(const Due& d) {
  std::string s;
  for (const auto& [on, name] : std::vector<std::pair<bool, const char*>>{
           {d.log, "log"}, {d.eval, "eval"}, {d.save, "save"}, {d.snapshot, "snapshot"}, {d.stop, "stop"},
           {d.last, "last"}}) {
    if (on) s += s.empty() ? name : std::string(" ") + name;
  }
  return s;
}

// 1,000 steps; log every 50, eval every 200, save every 300, snapshots
// every 100, save_final.
TEST(CadenceTest, EachStepsDutiesFromTheConfigAndTheAgreedRequests) {
  CadenceOptions o;
  o.total_steps = 1000;
  o.log_every = 50;
  o.eval_every = 200;
  o.save_every = 300;
  o.memory_every = 100;
  o.save_final = true;
  struct Case {
    int64_t steps_done;
    AgreedRequests agreed;
    std::string due;
  };
  const std::vector<Case> cases = {
      {1, {}, ""},
      {50, {}, "log"},
      {100, {}, "log snapshot"},
      {200, {}, "log eval snapshot"},
      {300, {}, "log save snapshot"},
      {600, {}, "log eval save snapshot"},
      {999, {}, ""},
      {1000, {}, "log eval save last"},  // no snapshot at the end: the final save covers it
      // Requests agreed in the step: due once reached, never before.
      {437, {0, 440, 0}, ""},
      {440, {0, 440, 0}, "save"},
      {441, {0, 440, 0}, "save"},  // a late step still serves it (the loop skips a step saved twice)
      {440, {0, 0, 440}, "eval"},
      {440, {440, 0, 0}, "log eval save stop last"},  // a stop ends with an eval and, with save_final, a save
      {1000, {1000, 0, 0}, "log eval save last"},  // a stop at the last step is just the end
  };
  for (const Case& c : cases) {
    EXPECT_EQ(Show(DueAfter(o, c.steps_done, c.agreed)), c.due) << "after step " << c.steps_done;
  }
}

TEST(CadenceTest, AStopWithoutSaveFinalStillEvaluatesButDoesNotSave) {
  CadenceOptions o;
  o.total_steps = 100;
  o.log_every = 10;
  EXPECT_EQ(Show(DueAfter(o, 37, {37, 0, 0})), "log eval stop last");
  EXPECT_EQ(Show(DueAfter(o, 100, {})), "log eval last");
}

TEST(CadenceTest, TheLastStepAlwaysLogsAndTheLogIsKnownBeforeTheStep) {
  CadenceOptions o;
  o.total_steps = 105;
  o.log_every = 50;
  EXPECT_TRUE(LogDue(o, 50));
  EXPECT_FALSE(LogDue(o, 104));
  EXPECT_TRUE(LogDue(o, 105));
}

TEST(CadenceTest, TheConfigGivesTheOptionsAndAWorldOfOneTakesNoSnapshots) {
  config::JobConfig config;
  config.mutable_train()->set_log_every(25);
  config.mutable_train()->set_eval_every(500);
  config.mutable_checkpoint()->set_every_steps(250);
  config.mutable_checkpoint()->set_memory_every_steps(100);
  config.mutable_checkpoint()->set_save_final(true);
  const CadenceOptions o = CadenceFromConfig(config, 2000, /*memory_snapshots=*/true);
  EXPECT_EQ(o.total_steps, 2000);
  EXPECT_EQ(o.log_every, 25);
  EXPECT_EQ(o.eval_every, 500);
  EXPECT_EQ(o.save_every, 250);
  EXPECT_EQ(o.memory_every, 100);
  EXPECT_TRUE(o.save_final);
  EXPECT_EQ(CadenceFromConfig(config, 2000, /*memory_snapshots=*/false).memory_every, 0);
}

}  // namespace
}  // namespace shardline
