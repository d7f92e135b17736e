#include "coordinator/decide/restore_plan.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"

namespace shardline {
namespace {

coordinator::HeldSnapshot Held(int64_t step, int world, int shard) {
  coordinator::HeldSnapshot h;
  h.set_step(step);
  h.set_world_size(world);
  h.set_rank(shard);
  return h;
}

std::string Show(const SnapshotRestorePlan& p) {
  if (p.step == 0) return "disk";
  return absl::StrCat(p.step, " of world ", p.world, ": ", absl::StrJoin(p.sources, ","));
}

struct Case {
  std::string name;
  RestorePlanInput in;
  std::string want;
};

RestorePlanInput Input(int world, std::map<int, std::vector<coordinator::HeldSnapshot>> held, int64_t disk = 0) {
  RestorePlanInput in;
  in.memory_snapshots = true;
  in.world_size = world;
  in.held = std::move(held);
  in.disk_step = disk;
  return in;
}

TEST(RestorePlanTest, TheNewestFullyHeldSnapshotNewerThanDisk) {
  // Two ranks, each with its own shard and its neighbour's (memory_copies=1).
  const std::map<int, std::vector<coordinator::HeldSnapshot>> pair = {
      {0, {Held(200, 2, 0), Held(200, 2, 1), Held(100, 2, 0), Held(100, 2, 1)}},
      {1, {Held(200, 2, 1), Held(200, 2, 0), Held(100, 2, 1), Held(100, 2, 0)}}};
  std::vector<Case> cases;
  cases.push_back({"same world: every rank sends its own shard", Input(2, pair), "200 of world 2: 0,1"});
  cases.push_back({"disk as new: memory all the same (no checkpoint read)", Input(2, pair, 200), "200 of world 2: 0,1"});
  cases.push_back({"disk newer", Input(2, pair, 300), "disk"});
  RestorePlanInput limited = Input(2, pair);
  limited.limit = 200;  // the save of 200 failed and was not committed since
  cases.push_back({"never past a failed save", limited, "100 of world 2: 0,1"});
  RestorePlanInput bad = Input(2, pair);
  bad.bad_steps = {200};
  cases.push_back({"a snapshot that failed once is skipped", bad, "100 of world 2: 0,1"});
  // Rank 1 returns empty-handed (a restarted process): rank 0 holds both.
  cases.push_back({"a lost shard comes from the copy",
                   Input(2, {{0, {Held(200, 2, 0), Held(200, 2, 1)}}, {1, {}}}), "200 of world 2: 0,0"});
  cases.push_back({"a shard nobody holds: disk",
                   Input(2, {{0, {Held(200, 2, 0)}}, {1, {}}}, 100), "disk"});
  // A world of 4 shrinks to 3 (slot 1 gone; survivors are ranks 0..2).
  cases.push_back({"resharded from a larger world: lowest holder",
                   Input(3, {{0, {Held(300, 4, 0), Held(300, 4, 3)}},
                             {1, {Held(300, 4, 2), Held(300, 4, 1)}},
                             {2, {Held(300, 4, 3), Held(300, 4, 2)}}}),
                   "300 of world 4: 0,1,1,0"});
  RestorePlanInput off = Input(2, pair);
  off.memory_snapshots = false;
  cases.push_back({"snapshots off", off, "disk"});
  cases.push_back({"a world of one", Input(1, {{0, {Held(200, 1, 0)}}}), "disk"});
  // Islands of 2 (runtime.min_islands): a world of 4 in 2 islands loses
  // island 1; the survivors (island 0) hold island 0's shards, all the
  // world of one island reads (shards 2, 3 unread).
  RestorePlanInput kept = Input(2, {{0, {Held(300, 4, 0), Held(300, 4, 1)}}, {1, {Held(300, 4, 1), Held(300, 4, 0)}}});
  kept.island_size = 2;
  cases.push_back({"islands: the islands read are held", kept, "300 of world 4: 0,0,-1,-1"});
  // It loses island 0: the survivors hold island 1's, which no island reads
  // (island 0 of the new world reads island 0): disk.
  RestorePlanInput lost = Input(2, {{0, {Held(300, 4, 2), Held(300, 4, 3)}}, {1, {Held(300, 4, 3), Held(300, 4, 2)}}});
  lost.island_size = 2;
  cases.push_back({"islands: the islands read are gone", lost, "disk"});
  // Back to two islands from a world of one: both read island 0.
  RestorePlanInput grown = Input(4, {{0, {Held(400, 2, 0), Held(400, 2, 1)}}, {1, {Held(400, 2, 1)}}, {2, {}}, {3, {}}});
  grown.island_size = 2;
  cases.push_back({"islands: a returning island reads the other's", grown, "400 of world 2: 0,0"});
  for (const Case& c : cases) EXPECT_EQ(Show(PlanSnapshotRestore(c.in)), c.want) << c.name;
}

TEST(RestorePlanTest, TheLimitIsTheFirstFailedSaveNotCommittedSince) {
  EXPECT_EQ(FailedSaveLimit({}, 0), INT64_MAX);
  EXPECT_EQ(FailedSaveLimit({{300, {2}}, {500, {3}}}, 0), 300);
  EXPECT_EQ(FailedSaveLimit({{300, {2}}, {500, {3}}}, 400), 500);  // 300 committed since
  EXPECT_EQ(FailedSaveLimit({{300, {2}}}, 300), INT64_MAX);
}

// The verdict follows the failure's code, never its wording: a read-only
// file system is not a full disk.
TEST(SaveGiveUpStatusTest, TheCodeSaysWhatToDo) {
  SaveGiveUp s;
  s.step = 600;
  s.attempts = 3;
  s.rank = 1;
  s.failure = "open /w/checkpoints/step_600/shard: whatever the words";
  s.kept_dir = "/w/checkpoints/step_400";
  s.root = "/w/checkpoints";
  s.code = absl::StatusCode::kResourceExhausted;
  absl::Status full = SaveGiveUpStatus(s);
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StrContains(full.message(), "free space in /w/checkpoints")) << full;
  EXPECT_TRUE(absl::StrContains(full.message(), "step 600 failed in 3 generations (last on rank 1")) << full;
  EXPECT_TRUE(absl::StrContains(full.message(), "newest: /w/checkpoints/step_400")) << full;
  s.code = absl::StatusCode::kFailedPrecondition;
  absl::Status read_only = SaveGiveUpStatus(s);
  EXPECT_EQ(read_only.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(read_only.message(), "make writable")) << read_only;
  EXPECT_FALSE(absl::StrContains(read_only.message(), "free space")) << read_only;
  s.code = absl::StatusCode::kPermissionDenied;
  EXPECT_EQ(SaveGiveUpStatus(s).code(), absl::StatusCode::kFailedPrecondition);
  s.code = absl::StatusCode::kInternal;
  s.kept_dir = "";
  absl::Status io = SaveGiveUpStatus(s);
  EXPECT_EQ(io.code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(absl::StrContains(io.message(), "repair /w/checkpoints")) << io;
  EXPECT_TRUE(absl::StrContains(io.message(), "none yet")) << io;
}

}  // namespace
}  // namespace shardline
