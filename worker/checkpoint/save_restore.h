// Saving this rank's shard of the training state, and restoring a rank's
// state from a committed checkpoint written by any world size.
//
//   ShardSaver saver(env, root, &committer, /*async=*/true);   // committer: a CheckpointSink
//   ShardSource source{step, rank, world, &layout, params.data(), optimizer.get(), position, job_id};
//   RETURN_IF_ERROR(saver.Save(source));
//   saver.AwaitSnapshot();           // before the optimizer changes the state
//   RETURN_IF_ERROR(saver.Wait());   // the sink was told; it commits when all ranks are in
//
//   ASSIGN_OR_RETURN(Restored r, RestoreCheckpoint(env, StepDir(root, step), layout,
//                                                  params.data(), optimizer.get()));
#ifndef SHARDLINE_WORKER_CHECKPOINT_SAVE_RESTORE_H_
#define SHARDLINE_WORKER_CHECKPOINT_SAVE_RESTORE_H_

#include <cstdint>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "common/checkpoint/shard_file.h"
#include "common/platform/env.h"
#include "common/platform/mutex.h"
#include "proto/config.pb.h"
#include "proto/train_state.pb.h"
#include "worker/model/flat_layout.h"
#include "worker/optim/optimizer.h"

namespace shardline {

// Told about each shard this rank wrote, so the checkpoint can be committed
// once every rank's shard is durable.
class CheckpointSink {
 public:
  virtual ~CheckpointSink() = default;
  virtual absl::Status ShardSaved(int64_t step, int rank, int world, const WrittenShard& shard) = 0;
};

// A world of one commits its own shard at once and applies the retention
// policy (the coordinator does both for a distributed job).
class LocalCommitter : public CheckpointSink {
 public:
  LocalCommitter(Env* env, std::string root, config::CheckpointConfig policy, std::string job_id)
      : env_(env), root_(std::move(root)), policy_(std::move(policy)), job_id_(std::move(job_id)) {}
  absl::Status ShardSaved(int64_t step, int rank, int world, const WrittenShard& shard) override;
  // Retention keeps `step` (the checkpoint this run restored from).
  void Pin(int64_t step) { pinned_ = step; }

 private:
  Env* env_;
  std::string root_;
  config::CheckpointConfig policy_;
  std::string job_id_;
  int64_t pinned_ = 0;
};

// The best eval value (checkpoint.best_metric) seen so far and its step;
// step -1: none yet. Saved in every shard so the series survives restarts.
struct BestSoFar {
  int64_t step = -1;
  double value = 0;
};

// What one rank saves at one step. The pointers are borrowed: `params` (the
// full working copy, `layout.total_size()` floats) and `optimizer` must stay
// alive, and unchanged, until the snapshot is taken.
struct ShardSource {
  int64_t step = 0;
  int rank = 0;
  int world = 1;
  const FlatLayout* layout = nullptr;
  const float* params = nullptr;
  Optimizer* optimizer = nullptr;
  state::DataPosition position;
  std::string job_id;
  BestSoFar best;
  // Islands (collective.islands): `rank` and `world` are the world's, the
  // optimizer's pieces its island's (islands.h).
  int islands = 1;
  // This worker's numerics fingerprint (worker/train/numerics.h); 0: none.
  uint64_t numerics = 0;
};

// A copy of this rank's shard of the training state: the optimizer's shard
// of `params`, its state, the data position and the model's tensor table.
// Training may go on changing the originals once this returns.
ShardContents SnapshotShard(const ShardSource& source);
// The same shard as views of `source` (ShardBuffer::parts), for a writer
// that finishes before anything in `source` changes: no copy.
ShardContents ViewShard(const ShardSource& source);

// Writes a snapshot to root/step_<step>/shard-<rank>-of-<world>.ckpt.
absl::StatusOr<WrittenShard> WriteSnapshot(Env* env, const std::string& root, ShardContents snapshot);

// Saves shards the CheckFreq way. Save() returns at once; a background
// thread first snapshots the shard (copies the parameters and optimizer
// state, which the next step's forward and backward only read), then writes
// it and reports it to the sink. The training loop calls AwaitSnapshot()
// before anything changes that state (the optimizer update), so it waits
// only if the copy has not finished, and Save() waits only if the previous
// save has not. With async off, Save() does everything before returning.
// Not thread-safe; one per training loop.
// A failure to write this rank's shard of `step` (disk full, I/O error),
// carrying the step as a status payload so the worker can report it as a
// failed save without reading the message. Same code and message as `cause`.
absl::Status SaveFailedError(int64_t step, const absl::Status& cause);
// The step a SaveFailedError names, or -1 for any other status.
int64_t SaveFailedStep(const absl::Status& status);

class ShardSaver {
 public:
  ShardSaver(Env* env, std::string root, CheckpointSink* sink, bool async)
      : env_(env), root_(std::move(root)), sink_(sink), async_(async) {}
  ~ShardSaver();  // waits for a save in flight

  // Saves this rank's shard at `source.step`. What `source` points to must
  // stay unchanged until AwaitSnapshot() returns. Returns the error of the
  // previous background save, if it failed.
  absl::Status Save(const ShardSource& source);
  // Blocks until the snapshot of the save in flight (if any) is taken.
  void AwaitSnapshot();
  // Waits for the save in flight; returns its result.
  absl::Status Wait();
  // Seconds the caller spent blocked in Save() and AwaitSnapshot().
  double stall_seconds() const { return stall_seconds_; }

 private:
  absl::Status WriteAndReport(ShardContents snapshot);

  Env* env_;
  std::string root_;
  CheckpointSink* sink_;
  bool async_;
  std::thread thread_;
  absl::Status background_;
  Mutex mu_;
  bool snapshot_pending_ ABSL_GUARDED_BY(mu_) = false;
  double stall_seconds_ = 0;
};

struct Restored {
  int64_t step = 0;
  state::DataPosition position;
  BestSoFar best;
  int64_t bytes_read = 0;  // checkpoint file bytes read (0 from memory)
  // The numerics fingerprints of the shards read (their headers'), each
  // once, in the order met; none where no header had one.
  std::vector<uint64_t> numerics;
};

// Adds the header's numerics fingerprint to r->numerics unless absent or
// there already.
void NoteNumerics(const state::ShardHeader& header, Restored* r);

// Restores from the committed checkpoint in `step_dir`, whatever world size
// wrote it: every shard's parameters into `params` (all of them), and the
// optimizer state overlapping `optimizer`'s shard. Verifies each shard
// against the manifest (size, whole-file CRC) and its own block CRCs, and
// the tensor table against `layout`. kDataLoss naming the file on
// corruption; kFailedPrecondition if the checkpoint belongs to another model
// or optimizer.
// A run of `islands` islands (collective.islands) restores only from a
// checkpoint of as many (FailedPrecondition naming both otherwise), and
// each rank from the shards of its own `island` (-1: all shards, with
// islands = 1).
absl::StatusOr<Restored> RestoreCheckpoint(Env* env, const std::string& step_dir, const FlatLayout& layout,
                                           float* params, Optimizer* optimizer, int island = -1, int islands = 1);

}  // namespace shardline

#endif  // SHARDLINE_WORKER_CHECKPOINT_SAVE_RESTORE_H_
