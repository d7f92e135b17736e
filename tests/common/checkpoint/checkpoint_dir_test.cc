#include "common/checkpoint/checkpoint_dir.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace shardline {
namespace {

class CheckpointDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = ::testing::TempDir() + "/checkpoint_dir_" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::system(("rm -rf '" + root_ + "'").c_str());
  }
  void MakeStep(int64_t step, bool committed) {
    Env* env = Env::Default();
    ASSERT_TRUE(env->CreateDirs(StepDir(root_, step)).ok());
    ASSERT_TRUE(WriteFileAtomically(env, StepDir(root_, step) + "/shard-00000-of-00001.ckpt", "x").ok());
    if (committed) {
      state::CheckpointManifest m;
      m.set_step(step);
      m.set_world_size(1);
      ASSERT_TRUE(WriteCommitted(env, StepDir(root_, step), m).ok());
    }
  }
  std::string root_;
};

TEST_F(CheckpointDirTest, StepDirectoriesAreZeroPaddedAndSortByStep) {
  EXPECT_EQ(StepDirName(1200), "step_000000001200");
  MakeStep(1000, true);
  MakeStep(200, true);
  MakeStep(30, false);
  EXPECT_EQ(*CommittedSteps(Env::Default(), root_), (std::vector<int64_t>{200, 1000}));
  EXPECT_EQ(ReadCommitted(Env::Default(), StepDir(root_, 1000))->step(), 1000);
  EXPECT_TRUE(CommittedSteps(Env::Default(), root_ + "/missing")->empty());
}

TEST_F(CheckpointDirTest, UncommittedDirectoriesBelowAStepAreDeleted) {
  MakeStep(100, true);
  MakeStep(200, false);
  MakeStep(300, false);  // a save in progress
  ASSERT_TRUE(DeleteUncommitted(Env::Default(), root_, 300).ok());
  EXPECT_FALSE(Env::Default()->IsDirectory(StepDir(root_, 200)));
  EXPECT_TRUE(Env::Default()->IsDirectory(StepDir(root_, 300)));
  EXPECT_TRUE(Env::Default()->IsDirectory(StepDir(root_, 100)));
}

TEST_F(CheckpointDirTest, RetentionKeepsTheLastKEveryMthAndPinnedSteps) {
  for (int64_t s = 100; s <= 1000; s += 100) MakeStep(s, true);
  config::CheckpointConfig policy;
  policy.set_keep_last(2);
  policy.set_keep_every(500);
  absl::StatusOr<std::vector<int64_t>> deleted = ApplyRetention(Env::Default(), root_, policy, {300});
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(*deleted, (std::vector<int64_t>{100, 200, 400, 600, 700, 800}));
  EXPECT_EQ(*CommittedSteps(Env::Default(), root_), (std::vector<int64_t>{300, 500, 900, 1000}));
}

}  // namespace
}  // namespace shardline
