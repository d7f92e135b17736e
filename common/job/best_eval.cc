#include "common/job/best_eval.h"

namespace shardline {

double BestMetricValue(const config::CheckpointConfig& policy, const EvalValues& eval) {
  if (policy.best_metric() == "loss") return eval.loss;
  if (policy.best_metric() == "bits_per_byte") return eval.bits_per_byte;
  return eval.accuracy;
}

bool BeatsBest(const config::CheckpointConfig& policy, double candidate, double best) {
  // No metric set: accuracy, higher is better, whatever best_mode says.
  const bool higher = policy.best_metric().empty() || policy.best_mode() == config::MAX;
  return higher ? candidate > best : candidate < best;
}

bool BestEval::Offer(int64_t step, const EvalValues& eval) {
  const double value = BestMetricValue(policy_, eval);
  if (step_ >= 0 && !BeatsBest(policy_, value, value_)) return false;
  step_ = step;
  value_ = value;
  return true;
}

}  // namespace shardline
