#include "worker/checkpoint/full_params.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/checkpoint/buffer_names.h"
#include "common/checkpoint/checkpoint_dir.h"
#include "common/checkpoint/verify.h"
#include "common/platform/status_macros.h"

namespace shardline {

absl::StatusOr<int64_t> PickCommittedStep(Env* env, const std::string& root, const std::string& want) {
  ASSIGN_OR_RETURN(std::vector<int64_t> steps, CommittedSteps(env, root));
  if (steps.empty()) return absl::NotFoundError(absl::StrCat("no committed checkpoint in ", root));
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

absl::StatusOr<FullParams> ReadFullParams(Env* env, const std::string& step_dir) {
  FullParams out;
  VerifyOptions read_params;
  read_params.on_header = [&](const state::ShardHeader& h) {
    out.params.resize(static_cast<size_t>(h.total_size()));  // VerifyCheckpoint checks every shard agrees
    return absl::OkStatus();
  };
  read_params.place = [&](const state::ShardHeader& h, const state::BufferEntry& b) -> absl::StatusOr<Placements> {
    if (b.name() != kParamsBuffer) return Placements{};
    return PlacePiecesAt(h, out.params.data());
  };
  ASSIGN_OR_RETURN(VerifiedCheckpoint v, VerifyCheckpoint(env, step_dir, read_params));
  out.tensors.assign(v.headers[0].tensors().begin(), v.headers[0].tensors().end());
  return out;
}

}  // namespace shardline
