// Where a forming world restores from, as pure functions of what the
// coordinator knows: the snapshots each member says it holds in memory,
// the newest committed checkpoint, saves that failed, snapshots found bad.
// No lock, clock or I/O; Job::Form calls them with its state.
//
//   MemoryRestorePlan plan = PlanMemoryRestore(input);
//   start = plan.step > 0 ? plan.step : input.disk_step;  // memory, else disk
#ifndef SHARDLINE_COORDINATOR_RESTORE_PLAN_H_
#define SHARDLINE_COORDINATOR_RESTORE_PLAN_H_

#include <cstdint>
#include <map>
#include <set>
#include <vector>

#include "proto/coordinator.pb.h"

namespace shardline {

struct RestorePlanInput {
  // checkpoint.memory_every_steps > 0: the workers take snapshots at all.
  bool memory_snapshots = false;
  int world_size = 0;  // of the forming world
  // By rank of the forming world: the snapshots it holds (step, the world
  // the snapshot was taken in, the shard it is of that world).
  std::map<int, std::vector<coordinator::HeldSnapshot>> held;
  int64_t disk_step = 0;       // the newest committed checkpoint; 0: none
  int64_t limit = INT64_MAX;   // restore nothing at or past it (FailedSaveLimit)
  std::set<int64_t> bad_steps; // snapshots that failed to restore once
};

struct MemoryRestorePlan {
  int64_t step = 0;  // 0: restore from disk (or start fresh)
  int world = 0;     // the world the snapshot was taken in
  // sources[s]: the rank (of the forming world) that sends shard s.
  std::vector<int> sources;
};

// The newest step, at least as new as the disk's (then no checkpoint is
// read), below `limit` and not bad, of which every shard of some world is
// held by some member: from memory, each shard from its own rank when the
// world is the same size and it holds it (nothing moves), else from its
// lowest holder. A world of one keeps no peers' copies: never from memory.
MemoryRestorePlan PlanMemoryRestore(const RestorePlanInput& input);

// The first step whose save failed and has not been committed since (a
// world restored past it would skip that save instead of trying it again,
// and a disk that keeps failing would never stop the job); INT64_MAX if
// none. `failures`: step -> generations in which saving it failed.
int64_t FailedSaveLimit(const std::map<int64_t, std::set<uint64_t>>& failures, int64_t latest_good);

}  // namespace shardline

#endif  // SHARDLINE_COORDINATOR_RESTORE_PLAN_H_
