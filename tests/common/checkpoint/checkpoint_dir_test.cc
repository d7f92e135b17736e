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
  ASSERT_TRUE(DeleteUncommitted(Env::Default(), root_, 300).status().ok());
  EXPECT_FALSE(Env::Default()->IsDirectory(StepDir(root_, 200)));
  EXPECT_TRUE(Env::Default()->IsDirectory(StepDir(root_, 300)));
  EXPECT_TRUE(Env::Default()->IsDirectory(StepDir(root_, 100)));
}

// Issue 46: after a disk-full stop, an uncommitted step with a renamed
// shard and an empty later step directory stayed behind. A new run removes
// every uncommitted one, says which, and never touches a committed one.
TEST_F(CheckpointDirTest, ANewRunRemovesWhatNeverCommittedAndSaysSo) {
  Env* env = Env::Default();
  MakeStep(400, true);
  MakeStep(600, false);
  ASSERT_TRUE(WriteFileAtomically(env, StepDir(root_, 600) + "/shard-00000-of-00002.ckpt", "renamed").ok());
  ASSERT_TRUE(env->CreateDirs(StepDir(root_, 800)).ok());  // empty
  absl::StatusOr<std::vector<int64_t>> removed = DeleteUncommitted(env, root_);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, (std::vector<int64_t>{600, 800}));
  EXPECT_FALSE(env->IsDirectory(StepDir(root_, 600)));
  EXPECT_FALSE(env->IsDirectory(StepDir(root_, 800)));
  EXPECT_EQ(*CommittedSteps(env, root_), (std::vector<int64_t>{400}));
  const std::string said = DescribeUncommittedRemoved(root_, *removed);
  EXPECT_NE(said.find("removed 2 uncommitted step directories under " + root_), std::string::npos) << said;
  EXPECT_NE(said.find("step_000000000600, step_000000000800"), std::string::npos) << said;
  EXPECT_EQ(DescribeUncommittedRemoved(root_, {}), "");
  EXPECT_TRUE(DeleteUncommitted(env, root_)->empty());
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
