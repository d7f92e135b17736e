// Which eval is the best, by one rule for both processes: by
// checkpoint.best_metric ("accuracy", "loss" or "bits_per_byte") and best_mode (MAX or MIN);
// with no metric set, by accuracy, higher is better. With a metric set, the
// worker saves the best so far in every shard and keeps the best eval's
// checkpoint as BEST; the coordinator shows the best eval either way
// (`shardline status`, the status page).
#ifndef SHARDLINE_COMMON_JOB_BEST_EVAL_H_
#define SHARDLINE_COMMON_JOB_BEST_EVAL_H_

#include <cstdint>

#include "proto/config.pb.h"

namespace shardline {

struct EvalValues {
  double loss = 0;
  double accuracy = 0;
  double bits_per_byte = 0;  // text models
};

// The value the rule compares: the loss, the accuracy or the bits per byte.
double BestMetricValue(const config::CheckpointConfig& policy, const EvalValues& eval);

// True if `candidate` (a BestMetricValue) beats `best`. Ties do not.
bool BeatsBest(const config::CheckpointConfig& policy, double candidate, double best);

// The best eval so far, by the rule above. Not thread-safe.
class BestEval {
 public:
  explicit BestEval(const config::CheckpointConfig& policy) : policy_(policy) {}

  // Offers the eval at `step`; true if it is the new best (the first eval
  // offered always is).
  bool Offer(int64_t step, const EvalValues& eval);

  // Continues from a saved best (step -1: none yet).
  void Reset(int64_t step, double value) {
    step_ = step;
    value_ = value;
  }

  int64_t step() const { return step_; }  // -1: no eval yet
  double value() const { return value_; }

 private:
  config::CheckpointConfig policy_;
  int64_t step_ = -1;
  double value_ = 0;
};

}  // namespace shardline

#endif  // SHARDLINE_COMMON_JOB_BEST_EVAL_H_
