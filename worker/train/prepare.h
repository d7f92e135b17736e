// The start of a run (train_loop.h: RunTraining), before its first step:
// the model, this rank's optimizer pieces, the pipeline and schedule, and
// the state initialised from the seed or restored (worker/checkpoint/
// restore_state.h picks from memory, disk or init_from).
#ifndef SHARDLINE_WORKER_TRAIN_PREPARE_H_
#define SHARDLINE_WORKER_TRAIN_PREPARE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/job/best_eval.h"
#include "proto/config.pb.h"
#include "worker/collective/collectives.h"
#include "worker/optim/outer_optimizer.h"
#include "worker/train/memory_plan.h"
#include "worker/train/train_loop.h"

namespace shardline {

// What RunTraining builds before its first step: the model, the optimizer of
// this rank's pieces, the pipeline and schedule, and the state initialised
// (a pure function of the seed) or restored.
struct Prepared {
  std::unique_ptr<Model> model;
  int64_t total_steps = 0;
  std::vector<Range> buckets;
  std::unique_ptr<Optimizer> optimizer;
  OuterOptimizer* outer = nullptr;  // islands: `optimizer`, with its outer state
  std::unique_ptr<BatchPipeline> pipeline;
  std::unique_ptr<LrSchedule> schedule;
  TrainState state;
  std::unique_ptr<BestEval> best;  // with a checkpoint.best_metric, saved in every shard and kept as BEST
  MemoryPlan memory_plan;          // what this worker is predicted to hold (memory_plan.h)
  IslandShape islands;             // the generation's (TrainOptions::island_rings, or made from the config)
  uint64_t numerics = 0;           // this process's numerics fingerprint (TrainOptions::on_numerics); 0: none
};

// Builds the run's parts and its state. Errors name the config field (a
// batch larger than the data, too many steps) or the checkpoint that does
// not fit.
absl::StatusOr<Prepared> Prepare(const config::JobConfig& config, const TrainingData& data, Collectives& comm,
                                 const TrainOptions& options);

// Says what the run is: in the log when `show` (rank 0) and to `observer`
// (may be null).
void Announce(const config::JobConfig& config, const Prepared& p, const Collectives& comm, bool show,
              StepObserver* observer);

}  // namespace shardline

#endif  // SHARDLINE_WORKER_TRAIN_PREPARE_H_
