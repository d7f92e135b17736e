// The full parameters of a committed checkpoint, assembled from every
// rank's shard (each verified as VerifyCheckpoint does): what `shardline
// ckpt export` writes as safetensors and `shardline sample` generates from.
//
//   ASSIGN_OR_RETURN(int64_t step, PickCommittedStep(env, CheckpointRoot(workdir), "latest"));
//   ASSIGN_OR_RETURN(FullParams p, ReadFullParams(env, StepDir(root, step)));
#ifndef SHARDLINE_WORKER_CHECKPOINT_FULL_PARAMS_H_
#define SHARDLINE_WORKER_CHECKPOINT_FULL_PARAMS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/platform/env.h"
#include "proto/train_state.pb.h"

namespace shardline {

// `want`: a step number, or "latest" / "" for the newest committed one.
// NotFound naming `root` when there is none, or not that one.
absl::StatusOr<int64_t> PickCommittedStep(Env* env, const std::string& root, const std::string& want);

struct FullParams {
  std::vector<state::TensorEntry> tensors;  // the layout the checkpoint was saved with
  std::vector<float> params;
};

// Reads and verifies the checkpoint directory `step_dir`.
absl::StatusOr<FullParams> ReadFullParams(Env* env, const std::string& step_dir);

}  // namespace shardline

#endif  // SHARDLINE_WORKER_CHECKPOINT_FULL_PARAMS_H_
