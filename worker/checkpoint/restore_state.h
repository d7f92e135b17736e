// A run's restore, in the resume order, in one place: from this rank's
// in-memory snapshot (the others' pieces by all-gather, no disk read),
// else from a committed checkpoint on disk (any world's), else parameters
// only from a safetensors file (checkpoint.init_from: optimizer and data
// start fresh), else nothing. Logs the restore on rank 0 and passes the
// named crash points (common/faults/fault_injection.h); the caller restores
// the data position and the best eval from what it returns.
#ifndef SHARDLINE_WORKER_CHECKPOINT_RESTORE_STATE_H_
#define SHARDLINE_WORKER_CHECKPOINT_RESTORE_STATE_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/job/shard.h"
#include "common/platform/env.h"
#include "worker/checkpoint/memory_snapshots.h"
#include "worker/checkpoint/save_restore.h"
#include "worker/collective/collectives.h"
#include "worker/model/flat_layout.h"
#include "worker/optim/optimizer.h"

namespace shardline {

struct RestoreSource {
  Env* env = nullptr;  // required: files and clock
  // > 0: this step, from `memory`, as snapshotted in a world of
  // memory_world ranks (0: this world's size).
  int64_t memory_step = 0;
  int memory_world = 0;
  MemorySnapshots* memory = nullptr;
  std::string disk_dir;   // a committed step directory; empty: none
  std::string init_from;  // a safetensors file; empty: none
  // After a restore from memory, all-gather every bucket so the parameters
  // are whole. false (ZeRO stage 3): this rank's pieces only.
  bool gather_params = true;
  // The run's islands (collective.islands): a disk restore reads the
  // shards of `island` only (save_restore.h: RestoreCheckpoint).
  int island = -1;
  int islands = 1;
  // The world's size, which names snapshots (islands: the whole world's,
  // not the island ring's); 0: comm's.
  int world = 0;
};

struct RestoredState {
  // Set when the full state (parameters, optimizer shard, data position,
  // best eval) was restored, from memory or disk; empty after init_from or
  // nothing.
  std::optional<Restored> restored;
  bool from_memory = false;
  double seconds = 0;  // the restore's wall time (memory or disk)
};

// Fills `params` (every parameter) and `optimizer`'s shard from the first
// source that is set. `buckets`: the gradient buckets whose pieces every
// rank owns (the memory restore all-gathers each).
absl::StatusOr<RestoredState> RestoreState(const RestoreSource& source, const FlatLayout& layout,
                                           const std::vector<Range>& buckets, Collectives& comm,
                                           absl::Span<float> params, Optimizer* optimizer);

}  // namespace shardline

#endif  // SHARDLINE_WORKER_CHECKPOINT_RESTORE_STATE_H_
