// In-memory snapshots (checkpoint.memory_every_steps) and their replicas: what
// a lost worker's replacement restores from instead of a checkpoint on disk.
//
// At a snapshot step every rank copies what only it holds - its shard of the
// parameters and of the optimizer state, the data position, the step, the
// best eval so far - into this process's memory, in the checkpoint shard
// format (with its CRCs), and passes copies along the ring: with `copies` =
// 2 (the default) rank r ends up holding shards r and r-1 of that step.
// Parameters are all-gathered every step, so the shards are all there is to
// keep. The store outlives the process's generations: a survivor of a lost
// worker still holds its snapshots when it registers again, says which
// (Held()), and the coordinator plans who sends what to whom
// (docs/checkpoint_format.md, "In-memory snapshots").
//
//   MemorySnapshots memory(env, /*keep_steps=*/2);
//   at a snapshot step, on every rank:
//     RETURN_IF_ERROR(memory.TakeAndReplicate(source, /*copies=*/2, comm));
//   after a loss, the new rank r, given the shards overlapping its range
//   (shard r, in the same world) from their holders:
//     RETURN_IF_ERROR(memory.Put(key, bytes));
//     ASSIGN_OR_RETURN(Restored at, memory.Restore(step, world, layout, params, optimizer));
//     RETURN_IF_ERROR(comm.AllGather(params));   // everyone else's ranges
#ifndef SHARDLINE_WORKER_CHECKPOINT_MEMORY_SNAPSHOTS_H_
#define SHARDLINE_WORKER_CHECKPOINT_MEMORY_SNAPSHOTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/platform/mem_env.h"
#include "worker/checkpoint/save_restore.h"
#include "worker/collective/collectives.h"

namespace shardline {

// One shard of one snapshot: rank `rank` of a world of `world` at `step`.
struct SnapshotKey {
  int64_t step = 0;
  int world = 0;
  int rank = 0;
  bool operator==(const SnapshotKey& o) const { return step == o.step && world == o.world && rank == o.rank; }
};

class MemorySnapshots {
 public:
  // Keeps the newest `keep_steps` snapshot steps (at least 1).
  // `clock` (the in-memory files' clock) must outlive this.
  explicit MemorySnapshots(Env* clock, int keep_steps = 2)
      : mem_(clock), keep_steps_(keep_steps < 1 ? 1 : keep_steps) {}

  // Snapshots this rank's shard of `source` and replicates it: `copies` - 1
  // ring shifts, each rank forwarding what it last received, so rank r
  // holds shards r, r-1, ..., r-copies+1 of source.step. Every rank of the
  // world calls it at the same step (a collective). Then drops steps beyond
  // the newest keep_steps. Islands: `comm` is the island's ring, so the
  // copies stay inside the island (never over a slow link), and shards are
  // named by world rank (source.rank of source.world).
  absl::Status TakeAndReplicate(const ShardSource& source, int copies, Collectives& comm);

  // Every shard held, newest step first.
  std::vector<SnapshotKey> Held();
  bool Holds(const SnapshotKey& key);
  // A held shard's bytes (to send to a peer); NotFound if not held.
  absl::StatusOr<std::string> Bytes(const SnapshotKey& key);
  // Stores a shard received from a peer, after verifying it (every CRC, and
  // that its header is `key`'s): DataLoss naming the key otherwise.
  absl::Status Put(const SnapshotKey& key, std::string bytes);
  // Restores the snapshot of `step` taken in a world of `world` into this
  // rank's pieces (optimizer->pieces(), of whatever world size and bucket
  // plan now): its optimizer state and `params`' values in those pieces
  // (the rest of `params` is the caller's to all-gather), from every held
  // shard of that snapshot - in the same world and plan, exactly this
  // rank's own. NotFound if the held shards do not cover the pieces;
  // FailedPrecondition if they are another model's or optimizer's. Islands
  // (island >= 0, this rank's island): only the shards of the snapshot's
  // island it reads (IslandSource), every island's pieces overlapping.
  absl::StatusOr<Restored> Restore(int64_t step, int world, const FlatLayout& layout, float* params,
                                   Optimizer* optimizer, int island = -1);
  // Drops everything (the job moved to a point no snapshot can serve).
  void Clear();
  // Bytes held.
  int64_t bytes() { return mem_.TotalBytes(); }

 private:
  std::string Path(const SnapshotKey& key) const;
  void Prune();

  MemEnv mem_;
  const int keep_steps_;
};

}  // namespace shardline

#endif  // SHARDLINE_WORKER_CHECKPOINT_MEMORY_SNAPSHOTS_H_
