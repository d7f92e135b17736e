// The one verification of a committed checkpoint (docs/checkpoint_format.md).
// Restore, `shardline ckpt verify` and `shardline ckpt export` read through
// VerifyCheckpoint; the coordinator's commit runs its first two stages
// (CheckManifest, CheckShardFiles) before it writes COMMITTED.
//
//   // Verify only (every byte is read and checked):
//   ASSIGN_OR_RETURN(VerifiedCheckpoint v, VerifyCheckpoint(env, StepDir(root, 1200)));
//   // Or read each buffer straight into place while verifying:
//   VerifyOptions o;
//   o.place = [&](const state::ShardHeader& h, const state::BufferEntry& b) { ... };
//   ASSIGN_OR_RETURN(VerifiedCheckpoint v, VerifyCheckpoint(env, dir, o));
#ifndef SHARDLINE_COMMON_CHECKPOINT_VERIFY_H_
#define SHARDLINE_COMMON_CHECKPOINT_VERIFY_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/checkpoint/shard_file.h"
#include "common/platform/env.h"
#include "proto/train_state.pb.h"

namespace shardline {

// The manifest on its own: a world of at least one, exactly one shard per
// rank 0..N-1, each named ShardFileName(rank, N) (so no manifest can point
// outside its step directory), sizes not negative. kDataLoss naming
// `step_dir` and the shard otherwise.
absl::Status CheckManifest(const state::CheckpointManifest& manifest, const std::string& step_dir);

// Every shard file the manifest names exists in `step_dir` with the
// manifest's size. kDataLoss naming the file otherwise, a missing file
// included: a committed checkpoint without one of its shards is damaged.
absl::Status CheckShardFiles(Env* env, const std::string& step_dir, const state::CheckpointManifest& manifest);

struct VerifyOptions {
  // Called for each shard once its header has passed every check below and
  // before any of its payload is read; an error is returned as is (e.g. the
  // header belongs to another model). Null: accept.
  std::function<absl::Status(const state::ShardHeader&)> on_header;
  // Where each buffer goes (see ReadShardInto); its bytes are verified either
  // way. Null: every buffer is read, verified and dropped.
  PlaceFn place;
  // The islands the reader expects (ShardHeader.islands; 0: whatever the
  // shards say). A checkpoint of another number is kFailedPrecondition
  // naming both. only_island >= 0 instead: a reader of islands (the job's
  // outer step on), which takes a checkpoint of any number K of islands and
  // reads only the shards of its island's source, IslandSource(only_island,
  // K) - every island holds the same parameters at a checkpoint, so a world
  // that lost or regained islands (runtime.min_islands) restores from one.
  // The other islands' files are still checked against the manifest's
  // sizes (and the first shard's read whole, to learn K).
  int islands = 0;
  int only_island = -1;
};

struct VerifiedCheckpoint {
  state::CheckpointManifest manifest;
  std::vector<state::ShardHeader> headers;  // in manifest order (of only_island's shards, if given)
  int64_t total_size = 0;                   // parameters in the model
};

// Reads `step_dir`/COMMITTED and every shard, checking: the manifest
// (CheckManifest) and files (CheckShardFiles); each shard's magic, version,
// header CRC and every block CRC (ReadShardInto); its checksum against the
// manifest; its step, rank and world size against the manifest; the same
// model size in every shard; and that the shards' pieces tile [0, total)
// exactly, without gaps or overlaps - the shards of each island on their
// own, in a checkpoint of islands (every shard naming the same number,
// which divides the world). kDataLoss naming the file on any
// failure; kNotFound if there is no COMMITTED file.
absl::StatusOr<VerifiedCheckpoint> VerifyCheckpoint(Env* env, const std::string& step_dir,
                                                    const VerifyOptions& options = {});

}  // namespace shardline

#endif  // SHARDLINE_COMMON_CHECKPOINT_VERIFY_H_
