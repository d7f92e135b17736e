#include "worker/train/outer_steps.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "common/platform/clock.h"
#include "common/platform/logging.h"
#include "common/platform/status_macros.h"
#include "worker/train/outer_step.h"
#include "worker/train/train_step.h"

namespace shardline {
namespace {

// The smaller of two requested steps, kNoStep (nothing asked) losing to any.
int64_t Earlier(int64_t a, int64_t b) { return a == kNoStep ? b : b == kNoStep ? a : std::min(a, b); }

}  // namespace

absl::StatusOr<AgreedRequests> OuterSteps::After(int64_t steps_done, int64_t total, const AgreedRequests& in_step,
                                                 const std::function<absl::Status()>& settle) {
  taken_.reset();
  if (!options_.shape.outer_steps) return in_step;
  held_ = AgreedRequests{Earlier(held_.stop, in_step.stop), Earlier(held_.checkpoint, in_step.checkpoint),
                         Earlier(held_.eval, in_step.eval)};
  if (!options_.shape.OuterDue(steps_done, total)) return AgreedRequests{};
  RETURN_IF_ERROR(settle());
  const Stopwatch watch(options_.env);
  OuterStepArgs args;
  args.optimizer = options_.optimizer;
  args.params = options_.params;
  args.buckets = options_.buckets;
  args.gather_params = options_.gather_params;
  args.island = options_.island;
  args.across = options_.across;
  args.step = steps_done;
  args.held = held_;
  args.wire = options_.wire;
  ASSIGN_OR_RETURN(const OuterResult o, OuterStep(args));
  held_ = AgreedRequests{};
  const double took = watch.ElapsedSeconds();
  ++steps_;
  bytes_sent_ += o.bytes_sent;
  seconds_ += took;
  taken_ = OuterStepReport{steps_done, took, o.bytes_sent, o.pseudo_gradient_norm, options_.shape.islands};
  if (options_.show) {
    SLOG(INFO) << absl::StrFormat("outer step at step %d: islands %.4g apart (pseudo-gradient RMS norm), "
                                  "their mean %.4g; %d bytes sent across islands",
                                  steps_done, o.pseudo_gradient_norm, o.averaged_norm, o.bytes_sent);
  }
  return o.agreed;
}

}  // namespace shardline
