#include "worker/checkpoint/full_params.h"

#include <algorithm>
#include <memory>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/checkpoint/buffer_names.h"
#include "common/checkpoint/checkpoint_dir.h"
#include "common/checkpoint/verify.h"
#include "common/platform/status_macros.h"

namespace shardline {

absl::Status NoCommittedCheckpointYet(const std::string& root) {
  return absl::NotFoundError(
      absl::StrCat("no committed checkpoint in ", root, " yet: the job has not finished a save (checkpoint.every_steps)"));
}

absl::StatusOr<int64_t> PickCommittedStep(Env* env, const std::string& root, const std::string& want) {
  ASSIGN_OR_RETURN(std::vector<int64_t> steps, CommittedSteps(env, root));
  if (steps.empty()) return NoCommittedCheckpointYet(root);
  if (want == "latest" || want.empty()) return steps.back();
  int64_t s;
  if (!absl::SimpleAtoi(want, &s)) {
    return absl::InvalidArgumentError(absl::StrCat("--step: '", want, "' is not a step or 'latest'"));
  }
  if (std::find(steps.begin(), steps.end(), s) == steps.end()) {
    return absl::NotFoundError(absl::StrCat("no committed checkpoint at step ", s, " in ", root));
  }
  return s;
}

absl::StatusOr<int64_t> ReadCheckpoint(Env* env, const std::string& root, const std::string& want,
                                       const std::function<absl::Status(int64_t step)>& read) {
  const bool latest = want.empty() || want == "latest";
  for (int attempt = 1;; ++attempt) {
    ASSIGN_OR_RETURN(const int64_t step, PickCommittedStep(env, root, want));
    const absl::Status status = read(step);
    if (status.ok()) return step;
    if (IsCommitted(env, StepDir(root, step))) return status;
    if (!latest) {
      return absl::NotFoundError(absl::StrCat("the checkpoint at step ", step, " in ", root,
                                              " was deleted (checkpoint retention) while it was being read; "
                                              "read a newer one ('latest' or `shardline ckpt list`)"));
    }
    if (attempt == kMaxCommittedReadAttempts) {
      return absl::UnavailableError(absl::StrCat("reading the newest committed checkpoint of ", root, ": ",
                                                 attempt, " in a row were deleted by retention while being read "
                                                 "(the job saves faster than they can be read); try again or "
                                                 "read a step that is kept (checkpoint.keep_every)"));
    }
  }
}

absl::StatusOr<FullParams> ReadFullParams(Env* env, const std::string& step_dir) {
  FullParams out;
  VerifyOptions read_params;
  read_params.on_header = [&](const state::ShardHeader& h) {
    out.params.resize(static_cast<size_t>(h.total_size()));  // VerifyCheckpoint checks every shard agrees
    return absl::OkStatus();
  };
  read_params.place = [&](const state::ShardHeader& h, const state::BufferEntry& b) -> absl::StatusOr<Placements> {
    // Islands: island 0's (after the run's last outer step every island's are the same).
    if (b.name() != kParamsBuffer || ShardIsland(h) != 0) return Placements{};
    return PlacePiecesAt(h, out.params.data());
  };
  ASSIGN_OR_RETURN(VerifiedCheckpoint v, VerifyCheckpoint(env, step_dir, read_params));
  out.tensors.assign(v.headers[0].tensors().begin(), v.headers[0].tensors().end());
  return out;
}

absl::StatusOr<SavedLayout> ReadSavedLayout(Env* env, const std::string& step_dir) {
  ASSIGN_OR_RETURN(const state::CheckpointManifest m, ReadCommitted(env, step_dir));
  RETURN_IF_ERROR(CheckManifest(m, step_dir));
  ASSIGN_OR_RETURN(std::unique_ptr<ShardReader> r, ShardReader::Open(env, step_dir + "/" + m.shards(0).file()));
  SavedLayout out;
  out.tensors.assign(r->header().tensors().begin(), r->header().tensors().end());
  out.tokenizer_sha256 = r->header().data_position().tokenizer_sha256();
  return out;
}

}  // namespace shardline
