#include "worker/train/nan_guard.h"

#include "common/platform/status_payload.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace shardline {

absl::Status NanGuard::Check(int64_t step, double loss, double grad_norm) {
  const bool bad_loss = !std::isfinite(loss);
  const bool bad_grad = std::isnan(grad_norm) || std::isinf(grad_norm);
  if (!bad_loss && !bad_grad) {
    last_good_step_ = step;
    last_good_loss_ = loss;
    return absl::OkStatus();
  }
  return Failure(step, bad_loss ? absl::StrCat("loss became ", loss)
                                 : absl::StrCat("gradient norm became ", grad_norm));
}

absl::Status NanGuard::Diverged(int64_t step, absl::string_view what) {
  return Failure(step, absl::StrCat(what, " became non-finite"));
}

absl::Status NanGuard::Failure(int64_t step, absl::string_view what) const {
  std::string last = last_good_step_ < 0
                         ? "no finite loss was seen before it"
                         : absl::StrCat("last finite loss ", last_good_loss_, " at step ",
                                        last_good_step_);
  return WithIntPayload(absl::FailedPreconditionError(absl::StrCat(
                            what, " at step ", step, " (within steps (", last_good_step_, ", ", step, "]; ", last,
                            "); lower schedule.base_lr or set train.grad_clip_norm")),
                        kDivergedStepUrl, step);
}

}  // namespace shardline
