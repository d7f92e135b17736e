#include "coordinator/decide/restore_plan.h"

#include <algorithm>
#include <functional>

#include "absl/strings/str_cat.h"

namespace shardline {

SnapshotRestorePlan PlanSnapshotRestore(const RestorePlanInput& in) {
  SnapshotRestorePlan plan;
  if (!in.memory_snapshots || in.world_size < 2) return plan;
  // step -> world it was taken in -> shard -> ranks holding it.
  std::map<int64_t, std::map<int, std::map<int, std::set<int>>>, std::greater<int64_t>> holders;
  for (const auto& [rank, held] : in.held) {
    for (const coordinator::HeldSnapshot& h : held) holders[h.step()][h.world_size()][h.rank()].insert(rank);
  }
  for (const auto& [step, worlds] : holders) {
    if (step < in.disk_step || step <= 0) break;  // disk is newer
    if (step >= in.limit || in.bad_steps.count(step) > 0) continue;
    for (const auto& [n, shards] : worlds) {
      const int m = in.island_size;
      if (m > 0 && (n % m != 0 || in.world_size % m != 0)) continue;  // not whole islands
      // The shards read: all of them; with islands, those of the islands read.
      const int needed = m > 0 ? std::min(n, (in.world_size / m) * m) : n;
      if (n < 1 || static_cast<int>(shards.size()) < needed) continue;
      std::vector<int> sources(static_cast<size_t>(n), -1);
      for (const auto& [shard, ranks] : shards) {
        if (shard < 0 || shard >= needed) continue;
        sources[static_cast<size_t>(shard)] = n == in.world_size && ranks.count(shard) > 0 ? shard : *ranks.begin();
      }
      if (std::find(sources.begin(), sources.begin() + needed, -1) != sources.begin() + needed) continue;
      plan.step = step;
      plan.world = n;
      plan.sources = std::move(sources);
      return plan;
    }
  }
  return plan;
}

int64_t FailedSaveLimit(const std::map<int64_t, std::set<uint64_t>>& failures, int64_t latest_good) {
  int64_t limit = INT64_MAX;
  for (const auto& [failed, generations] : failures) {
    if (failed > latest_good) limit = std::min(limit, failed);
  }
  return limit;
}

absl::Status SaveGiveUpStatus(const SaveGiveUp& s) {
  absl::StatusCode code;
  std::string action;
  switch (s.code) {
    case absl::StatusCode::kResourceExhausted:
      code = absl::StatusCode::kResourceExhausted;
      action = "free space in";
      break;
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kPermissionDenied:
      code = absl::StatusCode::kFailedPrecondition;
      action = "make writable (or move the workdir off a read-only file system)";
      break;
    default:
      code = absl::StatusCode::kInternal;
      action = "repair";
  }
  return absl::Status(code, absl::StrCat("saving the checkpoint at step ", s.step, " failed in ", s.attempts,
                                         " generations (last on rank ", s.rank, ": ", s.failure,
                                         "); stopping rather than retrying it without end. Every committed "
                                         "checkpoint is kept (",
                                         s.kept_dir.empty() ? std::string("none yet") : "newest: " + s.kept_dir,
                                         "); ", action, " ", s.root, ", then run again to resume"));
}

}  // namespace shardline
