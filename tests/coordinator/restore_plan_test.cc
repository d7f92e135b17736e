#include "coordinator/restore_plan.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

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

std::string Show(const MemoryRestorePlan& p) {
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
  for (const Case& c : cases) EXPECT_EQ(Show(PlanMemoryRestore(c.in)), c.want) << c.name;
}

TEST(RestorePlanTest, TheLimitIsTheFirstFailedSaveNotCommittedSince) {
  EXPECT_EQ(FailedSaveLimit({}, 0), INT64_MAX);
  EXPECT_EQ(FailedSaveLimit({{300, {2}}, {500, {3}}}, 0), 300);
  EXPECT_EQ(FailedSaveLimit({{300, {2}}, {500, {3}}}, 400), 500);  // 300 committed since
  EXPECT_EQ(FailedSaveLimit({{300, {2}}}, 300), INT64_MAX);
}

}  // namespace
}  // namespace shardline
