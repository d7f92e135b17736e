// The outer steps of one run with islands (common/job/islands.h: an
// IslandShape with outer_steps), as the train loop meets them after every
// step: the requests the island agreed since the last outer step are held
// (with islands, stops, checkpoints and evals act only at outer steps,
// agreed across islands there), and when one is due (IslandShape::OuterDue)
// the parameters are settled and OuterStep (outer_step.h) runs.
//
//   OuterSteps outer(options);
//   ... after each step:
//   ASSIGN_OR_RETURN(AgreedRequests agreed, outer.After(done, total, in_step, settle));
//   if (outer.taken()) observer->OnOuterStep(*outer.taken());
#ifndef SHARDLINE_WORKER_TRAIN_OUTER_STEPS_H_
#define SHARDLINE_WORKER_TRAIN_OUTER_STEPS_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "common/job/islands.h"
#include "common/job/shard.h"
#include "common/platform/env.h"
#include "common/platform/page_memory.h"
#include "proto/config.pb.h"
#include "worker/collective/collectives.h"
#include "worker/optim/outer_optimizer.h"
#include "worker/train/cadence.h"

namespace shardline {

// An outer step as the run reports it (StepObserver::OnOuterStep).
struct OuterStepReport {
  int64_t step = 0;                 // steps completed
  double seconds = 0;               // its wall time, waiting on the other islands included
  int64_t bytes_sent = 0;           // by this rank across islands
  double pseudo_gradient_norm = 0;  // how far the islands walked apart (OuterResult)
  int islands = 1;                  // in this generation's world
};

struct OuterStepsOptions {
  Env* env = nullptr;  // required: the clock
  IslandShape shape;   // with outer_steps: the other fields are then required
  OuterOptimizer* optimizer = nullptr;
  PagedFloats* params = nullptr;
  const std::vector<Range>* buckets = nullptr;
  bool gather_params = true;      // stage 2: the parameters made whole in the island after
  Collectives* island = nullptr;  // the island's ring (the run's world)
  Collectives* across = nullptr;  // the ring of this rank's counterparts in every island
  config::DilocoConfig::Wire wire = config::DilocoConfig::FP32;
  bool show = false;  // log each outer step (rank 0 of a run that shows progress)
};

class OuterSteps {
 public:
  explicit OuterSteps(OuterStepsOptions options) : options_(std::move(options)) {}

  // After a step that completed `steps_done` of `total`, whose ranks agreed
  // `in_step`: without outer steps, `in_step` (requests act at once). With
  // them: held until an outer step is due; then `settle` (no gather in
  // flight, the parameters agreed finite), the outer step, and what every
  // island agreed; nothing (AgreedRequests{}) between outer steps. Errors:
  // settle's, OuterStep's.
  absl::StatusOr<AgreedRequests> After(int64_t steps_done, int64_t total, const AgreedRequests& in_step,
                                       const std::function<absl::Status()>& settle);

  // The outer step the last After took, if it took one.
  const std::optional<OuterStepReport>& taken() const { return taken_; }
  int64_t steps() const { return steps_; }
  int64_t bytes_sent() const { return bytes_sent_; }
  double seconds() const { return seconds_; }

 private:
  const OuterStepsOptions options_;
  AgreedRequests held_;  // agreed in the island since the last outer step
  std::optional<OuterStepReport> taken_;
  int64_t steps_ = 0;
  int64_t bytes_sent_ = 0;
  double seconds_ = 0;
};

}  // namespace shardline

#endif  // SHARDLINE_WORKER_TRAIN_OUTER_STEPS_H_
