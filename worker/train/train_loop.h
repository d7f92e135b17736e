// The train loop: small components called in plain order. The same loop
// runs a world of one (`shardline train`, LocalCollectives: no network) and,
// given other Collectives, one rank of a distributed job.
//
//   for each step:
//     TrainStep (gradients -> reduce-scatter -> clip -> shard update -> all-gather)
//     NanGuard, progress line, train metrics every log_every
//     Evaluate every eval_every and at the end
//
//   TrainOptions opts;
//   opts.metrics = writer.get();
//   ASSIGN_OR_RETURN(TrainResult r, RunTraining(cfg, data, comm, opts));
#ifndef SHARDLINE_WORKER_TRAIN_TRAIN_LOOP_H_
#define SHARDLINE_WORKER_TRAIN_TRAIN_LOOP_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/metrics_writer.h"
#include "proto/config.pb.h"
#include "worker/collective/collectives.h"
#include "worker/data/dataset.h"

namespace shardline {

struct TrainOptions {
  // Receives train and eval lines (metrics.jsonl format); null: none.
  // Only rank 0 writes.
  MetricsSink* metrics = nullptr;
  // Draw the progress line and log eval results (rank 0 only).
  bool show_progress = true;
};

struct EvalPoint {
  int64_t step = 0;  // steps completed
  double loss = 0;
  double accuracy = 0;
  double train_seconds = 0;  // training time up to this point, evaluation excluded
};

struct TrainResult {
  int64_t steps = 0;
  double train_seconds = 0;       // wall time in steps, evaluation excluded
  double samples_per_second = 0;  // global examples per training second
  int64_t flops_per_example = 0;  // TrainFlopsPerExample of the model
  std::vector<EvalPoint> evals;   // in order; the last is at the final step
  std::vector<float> params;      // final parameters (full copy)
  std::vector<double> losses;     // training loss of every step
};

// Number of steps the config asks for on a training split of `num_examples`.
int64_t TotalSteps(const config::JobConfig& config, int64_t num_examples);

// Trains from scratch per `config` (already validated) on `data`.
absl::StatusOr<TrainResult> RunTraining(const config::JobConfig& config, const FashionMnist& data,
                                        Collectives& comm, const TrainOptions& options);

}  // namespace shardline

#endif  // SHARDLINE_WORKER_TRAIN_TRAIN_LOOP_H_
