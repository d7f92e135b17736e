// The outer step of islands (collective.islands, collective.diloco;
// docs/collectives.md "Islands"), run by every rank of every island after
// the same step:
//
//   1. agree across islands: the requests each island agreed on since the
//      last outer step (the smallest of each wins, as in a step), and
//      whether every pseudo-gradient is finite;
//   2. this rank's pseudo-gradient (outer parameters - parameters, over its
//      pieces) summed across the islands over the ring of the ranks that
//      own the same pieces: in float32 by reduce-scatter then all-gather;
//      in bfloat16 or int8 (outer_wire.h) each island's encoded once and
//      passed round the ring whole, then the K decoded added in island
//      order. Either way every island gets the same bits;
//   3. the outer Nesterov update (outer_optimizer.h), the pieces set to
//      the new outer parameters;
//   4. at ZeRO stage 2, each bucket all-gathered inside the island, so the
//      parameters are whole again (stage 3 gathers them as the next pass
//      reads them).
//
// The parameters must be settled first (no gather in flight, every rank
// agreed they are finite): the caller's Settle.
#ifndef SHARDLINE_WORKER_TRAIN_OUTER_STEP_H_
#define SHARDLINE_WORKER_TRAIN_OUTER_STEP_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/job/shard.h"
#include "common/platform/page_memory.h"
#include "worker/collective/collectives.h"
#include "worker/optim/outer_optimizer.h"
#include "proto/config.pb.h"
#include "worker/train/cadence.h"

namespace shardline {

struct OuterStepArgs {
  OuterOptimizer* optimizer = nullptr;
  PagedFloats* params = nullptr;        // whole flat buffer; this rank's pieces current
  const std::vector<Range>* buckets = nullptr;
  bool gather_params = true;            // stage 2: make the parameters whole in the island after
  Collectives* island = nullptr;        // the island's ring
  Collectives* across = nullptr;        // the ring of this rank's counterparts in every island
  int64_t step = 0;                     // steps completed (for errors and crash points)
  AgreedRequests held;                  // what this island agreed since the last outer step
  config::DilocoConfig::Wire wire = config::DilocoConfig::FP32;
};

struct OuterResult {
  AgreedRequests agreed;          // the smallest of every island's
  // sqrt(mean over islands of |outer parameters - island's parameters|^2):
  // how far the islands walked apart in the inner steps.
  double pseudo_gradient_norm = 0;
  double averaged_norm = 0;       // |mean over islands of the pseudo-gradients|
  int64_t bytes_sent = 0;         // by this rank across islands (the ring's payload)
};

// Errors: what a collective returns when the world breaks; kFailedPrecondition
// naming the step if some island's pseudo-gradient is not finite.
absl::StatusOr<OuterResult> OuterStep(const OuterStepArgs& args);

}  // namespace shardline

#endif  // SHARDLINE_WORKER_TRAIN_OUTER_STEP_H_
