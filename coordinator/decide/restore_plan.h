// Where a forming world restores from, as pure functions of what the
// coordinator knows: the snapshots each member says it holds in memory,
// the newest committed checkpoint, saves that failed, snapshots found bad.
// No lock, clock or I/O; Job::Form calls them with its state. (Named for
// the in-memory snapshots, apart from the worker's memory plan, PlanMemory,
// which is the bytes a worker will hold.)
//
//   SnapshotRestorePlan plan = PlanSnapshotRestore(input);
//   start = plan.step > 0 ? plan.step : input.disk_step;  // memory, else disk
#ifndef SHARDLINE_COORDINATOR_DECIDE_RESTORE_PLAN_H_
#define SHARDLINE_COORDINATOR_DECIDE_RESTORE_PLAN_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
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
  // Islands (collective.islands): the ranks of an island, in every world of
  // the job; 0 without islands. Island j of the forming world reads island
  // j mod K of the snapshot's (peer_set.h RestoreMayMove), so only the
  // shards of its first K' islands need holders.
  int island_size = 0;
};

struct SnapshotRestorePlan {
  int64_t step = 0;  // 0: restore from disk (or start fresh)
  int world = 0;     // the world the snapshot was taken in
  // sources[s]: the rank (of the forming world) that sends shard s; -1 for
  // a shard no rank reads (islands).
  std::vector<int> sources;
};

// The newest step, at least as new as the disk's (then no checkpoint is
// read), below `limit` and not bad, of which every shard of some world is
// held by some member: from memory, each shard from its own rank when the
// world is the same size and it holds it (nothing moves), else from its
// lowest holder. A world of one keeps no peers' copies: never from memory.
// Islands: of the snapshot's shards, those of the islands the forming world
// reads (its first K' islands' worth), in worlds of whole islands.
SnapshotRestorePlan PlanSnapshotRestore(const RestorePlanInput& input);

// The first step whose save failed and has not been committed since (a
// world restored past it would skip that save instead of trying it again,
// and a disk that keeps failing would never stop the job); INT64_MAX if
// none. `failures`: step -> generations in which saving it failed.
int64_t FailedSaveLimit(const std::map<int64_t, std::set<uint64_t>>& failures, int64_t latest_good);

// A save that failed in every attempt the job allows: why the job stops.
struct SaveGiveUp {
  int64_t step = 0;      // the save that kept failing
  int attempts = 0;      // generations it failed in
  int rank = 0;          // the last to fail it
  absl::StatusCode code = absl::StatusCode::kUnknown;  // its failure's code (WorkerReport.save_failure_code)
  std::string failure;   // its failure's message
  std::string kept_dir;  // the newest committed checkpoint, "" if none
  std::string root;      // the checkpoint directory
};
// The job's final status: the code says what the operator must do, by the
// failure's code, never its wording: RESOURCE_EXHAUSTED (free space) for a
// full disk or quota, FAILED_PRECONDITION (make it writable) for a
// read-only file system or a permission, INTERNAL (repair) for any other
// I/O error.
absl::Status SaveGiveUpStatus(const SaveGiveUp& s);

}  // namespace shardline

#endif  // SHARDLINE_COORDINATOR_DECIDE_RESTORE_PLAN_H_
