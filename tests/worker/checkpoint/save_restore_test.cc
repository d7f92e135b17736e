// Checkpoints across worlds and bucket plans, through real files: shards
// written by N ranks with one plan restore into M ranks with another, each
// rank getting every parameter and exactly its own pieces' optimizer state.
#include "worker/checkpoint/save_restore.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <vector>

#include "common/checkpoint/checkpoint_dir.h"
#include "common/checkpoint/shard_file.h"
#include "worker/model/bucket_plan.h"

namespace shardline {
namespace {

FlatLayout Layers() {
  FlatLayout layout;
  layout.Add("layer0/w", {13, 7});
  layout.Add("layer0/b", {7});
  layout.Add("layer1/w", {7, 5});
  layout.Add("layer1/b", {5});
  layout.Add("layer2/w", {5, 3});
  return layout;
}

config::OptimizerConfig AdamW() {
  config::OptimizerConfig c;
  c.mutable_adamw();
  return c;
}

// The value element `flat` of buffer `b` (0: params) holds when saved.
float Value(int b, int64_t flat) { return static_cast<float>(b * 10000 + flat) + 0.25f; }

// Writes and commits step 40 of a world of `world` ranks cutting `buckets`,
// each rank's shard made by `shard` (a copy, or views of the live state).
void SaveWorld(const std::string& root, const FlatLayout& layout, const std::vector<Range>& buckets, int world,
               ShardContents (*shard)(const ShardSource&) = SnapshotShard) {
  Env* env = Env::Default();
  state::CheckpointManifest m;
  m.set_step(40);
  m.set_world_size(world);
  m.set_job_id("job");
  for (int r = 0; r < world; ++r) {
    std::unique_ptr<Optimizer> opt = *Optimizer::Create(AdamW(), layout, OwnedPieces(buckets, r, world));
    std::vector<float> params(static_cast<size_t>(layout.total_size()), -1.0f);  // others' values are stale
    for (const Range& p : opt->pieces()) {
      for (int64_t i = p.begin; i < p.end; ++i) params[static_cast<size_t>(i)] = Value(0, i);
    }
    std::vector<StateBuffer*> state = opt->state();
    for (size_t b = 0; b < state.size(); ++b) {
      for (const PieceCopy& run : SharedRuns(opt->pieces(), {Range{0, layout.total_size()}})) {
        for (int64_t i = 0; i < run.size; ++i) {
          state[b]->values[static_cast<size_t>(run.from + i)] = Value(static_cast<int>(b) + 1, run.flat + i);
        }
      }
    }
    ShardSource source;
    source.step = 40;
    source.rank = r;
    source.world = world;
    source.layout = &layout;
    source.params = params.data();
    source.optimizer = opt.get();
    source.job_id = "job";
    source.position.set_next_step(40);
    absl::StatusOr<WrittenShard> w = WriteSnapshot(env, root, shard(source));
    ASSERT_TRUE(w.ok()) << w.status();
    state::ShardEntry* e = m.add_shards();
    e->set_rank(r);
    e->set_file(ShardFileName(r, world));
    e->set_size(w->size);
    e->set_crc32c(w->crc32c);
  }
  ASSERT_TRUE(WriteCommitted(env, StepDir(root, 40), m).ok());
}

// A synchronous save writes from the live state (ViewShard): the same
// files, byte for byte, as from a copy.
TEST(SaveRestoreTest, AShardWrittenFromViewsIsTheShardWrittenFromACopy) {
  const FlatLayout layout = Layers();
  const std::vector<Range> plan = BucketPlan(layout, 40);
  const std::string copied = ::testing::TempDir() + "/save_restore_copied", viewed = ::testing::TempDir() + "/save_restore_viewed";
  std::system(("rm -rf '" + copied + "' '" + viewed + "'").c_str());
  SaveWorld(copied, layout, plan, 3, SnapshotShard);
  SaveWorld(viewed, layout, plan, 3, ViewShard);
  for (int r = 0; r < 3; ++r) {
    const std::string name = "/" + StepDirName(40) + "/" + ShardFileName(r, 3);
    absl::StatusOr<std::string> a = Env::Default()->ReadFile(copied + name, 1 << 20);
    absl::StatusOr<std::string> b = Env::Default()->ReadFile(viewed + name, 1 << 20);
    ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
    EXPECT_FALSE(a->empty());
    EXPECT_EQ(*a, *b) << "rank " << r;
  }
}

TEST(SaveRestoreTest, AnyWorldAndBucketPlanRestoresAnyOther) {
  const FlatLayout layout = Layers();
  const int64_t total = layout.total_size();
  const std::vector<std::vector<Range>> plans = {BucketPlan(layout, 0), BucketPlan(layout, 40)};
  ASSERT_EQ(plans[1].size(), 3u);
  for (size_t from_plan = 0; from_plan < plans.size(); ++from_plan) {
    for (const int from : {1, 3}) {
      const std::string root = ::testing::TempDir() + "/save_restore_" + std::to_string(from_plan) + "_" +
                               std::to_string(from);
      std::system(("rm -rf '" + root + "'").c_str());
      SaveWorld(root, layout, plans[from_plan], from);
      for (const std::vector<Range>& to_plan : plans) {
        for (const int to : {1, 2, 4}) {
          SCOPED_TRACE(testing::Message() << "plan " << from_plan << " world " << from << " -> " << to_plan.size()
                                          << " buckets, world " << to);
          for (int r = 0; r < to; ++r) {
            std::unique_ptr<Optimizer> opt = *Optimizer::Create(AdamW(), layout, OwnedPieces(to_plan, r, to));
            std::vector<float> params(static_cast<size_t>(total), 0.0f);
            absl::StatusOr<Restored> got = RestoreCheckpoint(Env::Default(), StepDir(root, 40), layout,
                                                             params.data(), opt.get());
            ASSERT_TRUE(got.ok()) << got.status();
            EXPECT_EQ(got->step, 40);
            for (int64_t i = 0; i < total; ++i) ASSERT_EQ(params[static_cast<size_t>(i)], Value(0, i)) << i;
            std::vector<StateBuffer*> state = opt->state();
            for (size_t b = 0; b < state.size(); ++b) {
              for (const PieceCopy& run : SharedRuns(opt->pieces(), {Range{0, total}})) {
                for (int64_t i = 0; i < run.size; ++i) {
                  ASSERT_EQ(state[b]->values[static_cast<size_t>(run.from + i)],
                            Value(static_cast<int>(b) + 1, run.flat + i))
                      << state[b]->name << " element " << run.flat + i << " rank " << r;
                }
              }
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace shardline
