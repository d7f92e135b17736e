// The catalog's restart repair (CheckpointCatalog::Init) against the two
// crashes that leave a commit record beside a step directory without its
// COMMITTED file: one inside a commit (every shard there: finish it) and one
// inside retention, which removes COMMITTED, then the files, then the record
// (shards missing: finish removing it, never re-commit it). The second was
// found by the crash-point matrix: a coordinator killed at the job's end
// while retention removed step 100 came back with a "committed" step 100
// missing a shard.
#include "coordinator/checkpoint_catalog.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <string>

#include "common/checkpoint/checkpoint_dir.h"
#include "common/checkpoint/shard_file.h"
#include "common/platform/env.h"
#include "coordinator/job_store.h"

namespace shardline {
namespace {

class CheckpointCatalogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/checkpoint_catalog_test_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::system(("rm -rf '" + dir_ + "'").c_str());
    root_ = dir_ + "/checkpoints";
    store_ = *JobStore::Open(Env::Default(), dir_ + "/db");
  }

  std::unique_ptr<CheckpointCatalog> Open() {
    CatalogOptions o;
    o.root = root_;
    o.env = Env::Default();
    o.policy.set_keep_last(0);  // retention is not what removes anything here
    auto c = std::make_unique<CheckpointCatalog>(store_.get(), o);
    EXPECT_TRUE(c->Init("job").ok());
    return c;
  }

  // Both ranks' shards of `step` written, and the catalog's commit of them.
  void Commit(CheckpointCatalog& c, int64_t step) {
    std::map<int, coordinator::SavedShard> shards;
    ASSERT_TRUE(env_->CreateDirs(StepDir(root_, step)).ok());
    for (int rank = 0; rank < 2; ++rank) {
      coordinator::SavedShard& s = shards[rank];
      s.set_step(step);
      s.set_world_size(2);
      s.set_file(ShardFileName(rank, 2));
      s.set_size(4);
      ASSERT_TRUE(WriteFileAtomically(env_, StepDir(root_, step) + "/" + s.file(), "abcd").ok());
    }
    ASSERT_TRUE(c.Commit(step, 2, "job", shards).ok());
    ASSERT_TRUE(env_->FileExists(StepDir(root_, step) + "/" + kCommittedFile));
  }

  Env* env_ = Env::Default();
  std::string dir_, root_;
  std::unique_ptr<JobStore> store_;
};

TEST_F(CheckpointCatalogTest, ARestartFinishesAnInterruptedCommitButNotAnInterruptedRemoval) {
  {
    std::unique_ptr<CheckpointCatalog> c = Open();
    Commit(*c, 100);
    Commit(*c, 200);
  }
  // Step 100: killed inside retention, after COMMITTED and one shard went.
  ASSERT_TRUE(env_->DeleteFile(StepDir(root_, 100) + "/" + kCommittedFile).ok());
  ASSERT_TRUE(env_->DeleteFile(StepDir(root_, 100) + "/" + ShardFileName(1, 2)).ok());
  // Step 200: killed inside its commit, after the record, before COMMITTED.
  ASSERT_TRUE(env_->DeleteFile(StepDir(root_, 200) + "/" + kCommittedFile).ok());

  std::unique_ptr<CheckpointCatalog> again = Open();
  EXPECT_FALSE(env_->IsDirectory(StepDir(root_, 100))) << "a half-removed step is removed, not re-committed";
  EXPECT_TRUE(env_->FileExists(StepDir(root_, 200) + "/" + kCommittedFile)) << "an interrupted commit is finished";
  EXPECT_EQ(again->Restore().step, 200);
  // Its record is gone too: a third start finds nothing of step 100.
  std::unique_ptr<CheckpointCatalog> third = Open();
  EXPECT_FALSE(env_->IsDirectory(StepDir(root_, 100)));
  EXPECT_EQ(third->Restore().step, 200);
}

}  // namespace
}  // namespace shardline
