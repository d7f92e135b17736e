// Stops training on a non-finite loss or gradient norm, as big_vision does,
// with an error naming the step window in which it went bad.
//
//   NanGuard guard;
//   RETURN_IF_ERROR(guard.Check(result.step, result.loss, result.grad_norm));
#ifndef SHARDLINE_WORKER_TRAIN_NAN_GUARD_H_
#define SHARDLINE_WORKER_TRAIN_NAN_GUARD_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace shardline {

class NanGuard {
 public:
  // OK while loss (and grad_norm, if >= 0 or NaN) are finite. Otherwise
  // kFailedPrecondition: "loss became nan at step 37 (within steps (36, 37];
  // last finite loss 2.30 at step 36)". A retry would fail the same way.
  absl::Status Check(int64_t step, double loss, double grad_norm);

  // The same error for a divergence the world judged in step `step`
  // (nonfinite.h): "rank 1's loss or gradients became non-finite at step 37
  // (within steps (36, 37]; last finite loss 2.30 at step 36); ...".
  absl::Status Diverged(int64_t step, absl::string_view what);

  // Both carry the step (1-based) under this payload URL (status_payload.h).
  static constexpr char kDivergedStepUrl[] = "shardline.dev/diverged_step";

 private:
  absl::Status Failure(int64_t step, absl::string_view what) const;

  int64_t last_good_step_ = -1;
  double last_good_loss_ = 0;
};

}  // namespace shardline

#endif  // SHARDLINE_WORKER_TRAIN_NAN_GUARD_H_
