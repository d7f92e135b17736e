// Readers beside a running job (sample, ckpt export, ckpt verify): one
// committed checkpoint whole, or the newer one retention left.
#include "worker/checkpoint/full_params.h"

#include <stdlib.h>

#include <string>

#include "absl/strings/match.h"
#include "common/checkpoint/checkpoint_dir.h"
#include "gtest/gtest.h"

namespace shardline {
namespace {

class ReadCheckpointTest : public testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/read_committed_test.XXXXXX";
    root_ = std::string(mkdtemp(tmpl)) + "/checkpoints";
    ASSERT_TRUE(env_->CreateDirs(root_).ok());
  }
  void TearDown() override { env_->DeleteRecursively(root_.substr(0, root_.rfind('/'))).IgnoreError(); }

  void Commit(int64_t step) {
    ASSERT_TRUE(env_->CreateDirs(StepDir(root_, step)).ok());
    state::CheckpointManifest m;
    m.set_step(step);
    m.set_world_size(1);
    ASSERT_TRUE(WriteCommitted(env_, StepDir(root_, step), m).ok());
  }
  // What retention does: COMMITTED first, then the directory.
  void Retire(int64_t step) {
    ASSERT_TRUE(env_->DeleteFile(StepDir(root_, step) + "/" + kCommittedFile).ok());
    ASSERT_TRUE(env_->DeleteRecursively(StepDir(root_, step)).ok());
  }

  Env* env_ = Env::Default();
  std::string root_;
};

TEST_F(ReadCheckpointTest, NoneYetIsSaidPlainly) {
  absl::StatusOr<int64_t> r = ReadCheckpoint(env_, root_, "latest", [](int64_t) { return absl::OkStatus(); });
  ASSERT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(r.status().message(), "no committed checkpoint in " + root_ + " yet")) << r.status();
}

// Retention deletes the step being read (a new save committed meanwhile):
// "latest" moves on to the newer one by itself.
TEST_F(ReadCheckpointTest, LatestMovesOnWhenRetentionDeletesTheStepBeingRead) {
  Commit(5);
  std::vector<int64_t> tried;
  absl::StatusOr<int64_t> r = ReadCheckpoint(env_, root_, "latest", [&](int64_t step) -> absl::Status {
    tried.push_back(step);
    if (step == 5) {
      Commit(10);
      Retire(5);
      return absl::NotFoundError("open .../step_5/shard-00000-of-00001.ckpt: No such file or directory");
    }
    return absl::OkStatus();
  });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, 10);
  EXPECT_EQ(tried, (std::vector<int64_t>{5, 10}));
}

TEST_F(ReadCheckpointTest, ANamedStepThatIsDeletedIsNamed) {
  Commit(5);
  absl::StatusOr<int64_t> r = ReadCheckpoint(env_, root_, "5", [&](int64_t step) -> absl::Status {
    Commit(10);
    Retire(step);
    return absl::NotFoundError("gone");
  });
  ASSERT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(r.status().message(), "step 5")) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "deleted (checkpoint retention)")) << r.status();
}

// A checkpoint that is still committed and fails to read is a real failure:
// never hidden by moving on.
TEST_F(ReadCheckpointTest, AFailureOfAStepStillCommittedIsReturned) {
  Commit(5);
  Commit(10);
  int calls = 0;
  absl::StatusOr<int64_t> r = ReadCheckpoint(env_, root_, "latest", [&](int64_t) {
    ++calls;
    return absl::DataLossError("block 3 of shard 0: CRC mismatch");
  });
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(calls, 1);
}

// A job that saves faster than a reader reads: bounded, then said.
TEST_F(ReadCheckpointTest, GivesUpAfterABoundedNumberOfNewerSteps) {
  Commit(1);
  int calls = 0;
  absl::StatusOr<int64_t> r = ReadCheckpoint(env_, root_, "", [&](int64_t step) -> absl::Status {
    ++calls;
    Commit(step + 1);
    Retire(step);
    return absl::NotFoundError("gone");
  });
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
  EXPECT_EQ(calls, kMaxCommittedReadAttempts);
}

}  // namespace
}  // namespace shardline
