#include "worker/checkpoint/memory_snapshots.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/faults/fault_injection.h"
#include "common/checkpoint/buffer_names.h"
#include "common/checkpoint/checkpoint_dir.h"
#include "common/job/shard.h"
#include "common/platform/status_macros.h"

namespace shardline {
namespace {

constexpr char kRoot[] = "snapshots";

std::string Describe(const SnapshotKey& k) {
  return absl::StrFormat("in-memory snapshot of step %d, shard %d of %d", k.step, k.rank, k.world);
}

}  // namespace

std::string MemorySnapshots::Path(const SnapshotKey& key) const {
  return absl::StrCat(StepDir(kRoot, key.step), "/", ShardFileName(key.rank, key.world));
}

absl::Status MemorySnapshots::TakeAndReplicate(const ShardSource& source, int copies, Collectives& comm) {
  // The ring `comm` is the world, or (islands) an island: consecutive world
  // ranks from `base`. Snapshots are named by world rank and world size.
  const int world = comm.world_size(), rank = comm.rank();
  const int base = source.rank - rank;
  if (base < 0 || base + world > source.world) {
    return absl::InternalError(absl::StrFormat("a snapshot of shard %d of %d over a ring of %d ranks from rank %d",
                                               source.rank, source.world, world, base));
  }
  ShardWriteOptions in_memory;
  in_memory.unbuffered_min_bytes = INT64_MAX;
  ASSIGN_OR_RETURN(WrittenShard written,
                   WriteShard(&mem_, StepDir(kRoot, source.step), ShardFileName(source.rank, source.world),
                              ViewShard(source), in_memory));
  ASSIGN_OR_RETURN(std::string passing, mem_.ReadFile(written.path, INT64_MAX));
  const int shifts = std::min(copies, world) - 1;
  for (int k = 1; k <= shifts; ++k) {
    // Receive shard rank-k from the previous rank, which got it k-1 shifts ago.
    CrashPoint("snapshot_replication", source.step);
    ASSIGN_OR_RETURN(std::string got, comm.SendRecv((rank + 1) % world, passing, (rank + world - 1) % world));
    const SnapshotKey replica{source.step, source.world, base + (rank - k + world) % world};
    RETURN_IF_ERROR(Put(replica, got));
    passing = std::move(got);
  }
  Prune();
  return absl::OkStatus();
}

std::vector<SnapshotKey> MemorySnapshots::Held() {
  std::vector<SnapshotKey> out;
  absl::StatusOr<std::vector<std::string>> steps = mem_.GetChildren(kRoot);
  if (!steps.ok()) return out;
  for (const std::string& dir : *steps) {
    int64_t step = 0;
    if (!ParseStepDirName(dir, &step)) continue;
    absl::StatusOr<std::vector<std::string>> files = mem_.GetChildren(absl::StrCat(kRoot, "/", dir));
    if (!files.ok()) continue;
    for (const std::string& f : *files) {
      int rank = 0, world = 0;
      if (ParseShardFileName(f, &rank, &world)) out.push_back(SnapshotKey{step, world, rank});
    }
  }
  std::sort(out.begin(), out.end(), [](const SnapshotKey& a, const SnapshotKey& b) {
    return a.step != b.step ? a.step > b.step : a.world != b.world ? a.world < b.world : a.rank < b.rank;
  });
  return out;
}

bool MemorySnapshots::Holds(const SnapshotKey& key) { return mem_.FileExists(Path(key)); }

absl::StatusOr<std::string> MemorySnapshots::Bytes(const SnapshotKey& key) {
  absl::StatusOr<std::string> bytes = mem_.ReadFile(Path(key), INT64_MAX);
  if (!bytes.ok()) return absl::NotFoundError(absl::StrCat(Describe(key), " is not held here"));
  return bytes;
}

absl::Status MemorySnapshots::Put(const SnapshotKey& key, std::string bytes) {
  const std::string path = Path(key);
  mem_.PutFile(path, std::move(bytes));
  // Every CRC checked, nothing copied out (a shard's worth less at the peak).
  absl::StatusOr<state::ShardHeader> check = ReadShardInto(
      &mem_, path, [](const state::ShardHeader&, const state::BufferEntry&) { return Placements{}; }, nullptr);
  absl::Status bad;
  if (!check.ok()) {
    bad = check.status();
  } else if (check->step() != key.step || check->world_size() != key.world || check->rank() != key.rank) {
    bad = absl::DataLossError(
        absl::StrFormat("it holds step %d, shard %d of %d", check->step(), check->rank(), check->world_size()));
  }
  if (!bad.ok()) {
    static_cast<void>(mem_.DeleteFile(path));
    return absl::DataLossError(absl::StrCat(Describe(key), " received from a peer is damaged: ", bad.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<Restored> MemorySnapshots::Restore(int64_t step, int world, const FlatLayout& layout, float* params,
                                                   Optimizer* optimizer, int island) {
  const std::vector<Range>& mine = optimizer->pieces();
  const std::string what = absl::StrFormat("in-memory snapshot of step %d (a world of %d)", step, world);
  std::vector<StateBuffer*> state = optimizer->state();
  // Floats placed per buffer, and the shards read. Which shards hold what
  // is in their headers: the old world's pieces, of whatever bucket plan.
  std::map<std::string, int64_t> filled;
  std::optional<state::ShardHeader> last;
  Restored out;
  for (int s = 0; s < world; ++s) {
    const SnapshotKey key{step, world, s};
    if (!Holds(key)) continue;
    // A shard sharing nothing with this rank's pieces (another rank's
    // replica, in the same world) is left unread once its header says so.
    bool unneeded = false;
    const PlaceFn place = [&](const state::ShardHeader& h,
                              const state::BufferEntry& b) -> absl::StatusOr<Placements> {
      if (h.total_size() != layout.total_size()) {
        return absl::FailedPreconditionError(absl::StrCat(Describe(key), " holds a model of ", h.total_size(),
                                                          " parameters; this model has ", layout.total_size()));
      }
      const bool other_island = island >= 0 && ShardIsland(h) != IslandSource(island, ShardIslands(h));
      const std::vector<PieceCopy> runs = other_island ? std::vector<PieceCopy>() : SharedRuns(ShardPieces(h), mine);
      if (runs.empty()) {
        unneeded = true;
        return absl::CancelledError(absl::StrCat(Describe(key), " shares nothing with this rank's pieces"));
      }
      StateBuffer* into = nullptr;
      if (b.name() != kParamsBuffer) {
        for (StateBuffer* sb : state) {
          if (sb->name == b.name()) into = sb;
        }
        if (into == nullptr) {
          return absl::FailedPreconditionError(absl::StrCat(Describe(key), " has optimizer state '", b.name(),
                                                            "', which this run's optimizer does not use"));
        }
      }
      Placements out;
      for (const PieceCopy& run : runs) {
        filled[b.name()] += run.size;
        float* dst = into == nullptr ? params + run.flat : into->values.data() + run.to;
        out.push_back(Placement{dst, run.from, run.from + run.size});
      }
      return out;
    };
    absl::StatusOr<state::ShardHeader> read = ReadShardInto(&mem_, Path(key), place, nullptr);
    if (unneeded) continue;
    if (!read.ok()) return read.status();
    state::ShardHeader h = *std::move(read);
    if (last.has_value() && !(last->data_position().SerializeAsString() == h.data_position().SerializeAsString())) {
      return absl::DataLossError(absl::StrCat(what, ": its shards disagree on the data position"));
    }
    NoteNumerics(h, &out);
    last = std::move(h);
  }
  if (filled[kParamsBuffer] != optimizer->size() || !last.has_value()) {
    return absl::NotFoundError(absl::StrCat(what, ": the shards held here cover ", filled[kParamsBuffer], " of the ",
                                            optimizer->size(), " parameters of this rank's pieces"));
  }
  for (StateBuffer* sb : state) {
    if (filled[sb->name] != optimizer->size()) {
      return absl::FailedPreconditionError(absl::StrCat(what, " lacks optimizer state '", sb->name, "'"));
    }
  }
  out.step = last->step();
  out.position = last->data_position();
  if (last->has_best_step()) out.best = BestSoFar{last->best_step(), last->best_value()};
  return out;
}

void MemorySnapshots::Clear() { static_cast<void>(mem_.DeleteRecursively(kRoot)); }

void MemorySnapshots::Prune() {
  std::set<int64_t> steps;
  for (const SnapshotKey& k : Held()) steps.insert(k.step);
  while (static_cast<int>(steps.size()) > keep_steps_) {
    static_cast<void>(mem_.DeleteRecursively(StepDir(kRoot, *steps.begin())));
    steps.erase(steps.begin());
  }
}

}  // namespace shardline
