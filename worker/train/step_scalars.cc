#include "worker/train/step_scalars.h"

#include "worker/train/param_agreement.h"
#include "worker/train/train_step.h"

namespace shardline {
namespace {

// A vote as a value for the min-reduction: no request is larger than any.
// Finite, as every scalar of an all-reduce must be; steps stay far below it.
constexpr double kNoVote = 9007199254740992.0;  // 2^53
double VoteScalar(int64_t step) { return step == kNoStep ? kNoVote : static_cast<double>(step); }
int64_t AgreedStep(double reduced) { return reduced >= kNoVote ? kNoStep : static_cast<int64_t>(reduced); }

}  // namespace

std::array<double, StepScalars::kCount> StepScalars::Pack() const {
  return {loss_sum,
          grad_sq,
          VoteScalar(stop_vote),
          VoteScalar(checkpoint_vote),
          VoteScalar(eval_vote),
          nonfinite_seen ? 1.0 : 0.0,
          HashHigh(param_hash),
          HashHigh(param_hash),
          HashLow(param_hash),
          HashLow(param_hash)};
}

StepScalars StepScalars::Unpack(const std::array<double, kCount>& r) {
  StepScalars s;
  s.loss_sum = r[0];
  s.grad_sq = r[1];
  s.stop_vote = AgreedStep(r[2]);
  s.checkpoint_vote = AgreedStep(r[3]);
  s.eval_vote = AgreedStep(r[4]);
  s.nonfinite_seen = r[5] > 0;
  s.param_hash = HashFromHalves(r[6], r[8]);
  s.params_agree = r[6] == r[7] && r[8] == r[9];
  return s;
}

}  // namespace shardline
