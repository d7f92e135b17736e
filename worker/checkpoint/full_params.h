// The full parameters of a committed checkpoint, assembled from every
// rank's shard (each verified as VerifyCheckpoint does): what `shardline
// ckpt export` writes as safetensors and `shardline sample` generates from.
//
//   FullParams p;
//   ASSIGN_OR_RETURN(int64_t step, ReadCheckpoint(env, root, "latest", [&](int64_t s) -> absl::Status {
//     ASSIGN_OR_RETURN(p, ReadFullParams(env, StepDir(root, s)));
//     return absl::OkStatus();
//   }));
#ifndef SHARDLINE_WORKER_CHECKPOINT_FULL_PARAMS_H_
#define SHARDLINE_WORKER_CHECKPOINT_FULL_PARAMS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/platform/env.h"
#include "proto/train_state.pb.h"

namespace shardline {

// NotFound: `root` holds no committed checkpoint yet, said for an operator.
absl::Status NoCommittedCheckpointYet(const std::string& root);

// `want`: a step number, or "latest" / "" for the newest committed one.
// NotFound naming `root` when there is none yet, or not that one.
absl::StatusOr<int64_t> PickCommittedStep(Env* env, const std::string& root, const std::string& want);

// How many reads ReadCheckpoint makes before it gives up.
inline constexpr int kMaxCommittedReadAttempts = 8;

// Runs `read(step)` on the committed checkpoint `want` (as PickCommittedStep)
// and returns the step it read, so that a reader beside a running job sees
// one committed checkpoint whole or a newer one, never a torn one: when
// `read` fails because retention deleted the step meanwhile (it is no longer
// committed), "latest" moves on to the newest committed step by itself (at
// most kMaxCommittedReadAttempts reads in all, then UNAVAILABLE) and a named
// step fails with NotFound saying so. Any other failure is `read`'s.
absl::StatusOr<int64_t> ReadCheckpoint(Env* env, const std::string& root, const std::string& want,
                                       const std::function<absl::Status(int64_t step)>& read);

struct FullParams {
  std::vector<state::TensorEntry> tensors;  // the layout the checkpoint was saved with
  std::vector<float> params;
};

// Reads and verifies the checkpoint directory `step_dir`.
absl::StatusOr<FullParams> ReadFullParams(Env* env, const std::string& step_dir);

// The layout a committed checkpoint was saved with, and the SHA-256 of the
// tokenizer it was trained with ("" for bytes), from its first shard's
// header alone (checked as ShardReader checks it; nothing else is read).
struct SavedLayout {
  std::vector<state::TensorEntry> tensors;
  std::string tokenizer_sha256;
};
absl::StatusOr<SavedLayout> ReadSavedLayout(Env* env, const std::string& step_dir);

}  // namespace shardline

#endif  // SHARDLINE_WORKER_CHECKPOINT_FULL_PARAMS_H_
