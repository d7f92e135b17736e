// Evaluation on the test split: each rank evaluates its contiguous slice
// ShardRange(num_examples, rank, world) with the current parameters, and the
// sums are combined with one scalar all-reduce, so every rank returns the
// same numbers for the whole split.
//
// Memory: each forward covers at most `max_examples` examples (the train
// loop passes its micro-batch, and its own workspace, so an evaluation adds
// no activations to a training step's). At ZeRO stage 3 (an `exchange` whose
// parameters are sharded) each forward gathers the layers' buckets as it
// reads them, with the prefetch and release of training's forward, and gives
// every bucket back when it ends: the parameters are never whole at once.
// Every rank then runs the same number of forwards (those with fewer
// examples pad with a one-example forward whose sums are dropped), so the
// gathers pair up.
//
//   EvaluateArgs args{&model, params, &test, /*max_examples=*/16, &comm, ws, &exchange, &seen};
//   ASSIGN_OR_RETURN(EvalResult e, Evaluate(args));
#ifndef SHARDLINE_WORKER_TRAIN_EVALUATOR_H_
#define SHARDLINE_WORKER_TRAIN_EVALUATOR_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "worker/collective/collectives.h"
#include "worker/data/dataset.h"
#include "worker/model/model.h"
#include "worker/train/exchange.h"
#include "worker/train/nonfinite.h"

namespace shardline {

struct EvalResult {
  double loss = 0;      // mean cross-entropy over the split's targets (nats)
  double accuracy = 0;  // fraction of targets predicted correctly (argmax)
  int64_t count = 0;    // targets
  // Text: loss / ln 2, the bits per byte of a byte-level model; 0 otherwise.
  double bits_per_byte = 0;
  // Stage 3: the most floats of the parameters whole beyond this rank's
  // pieces at once during the evaluation (0 at stage 2).
  int64_t peak_whole_floats = 0;
};

struct EvaluateArgs {
  const Model* model = nullptr;   // required
  float* params = nullptr;        // required: whole, or at stage 3 bound to `exchange`
  const Dataset* data = nullptr;  // required: the split
  // Examples per forward at most (also bounded by the model's eval_chunk()).
  // Bounds memory; the chunks, and so the last bits of the sums, follow it.
  int max_examples = 1;
  Collectives* comm = nullptr;    // required
  ModelWorkspace* ws = nullptr;   // required: the model's; its hooks are set and cleared here
  // Null, or at stage 2: the parameters are whole. At stage 3: gathered
  // layer by layer; `seen` notes what a gather brought that was not finite.
  GradientExchange* exchange = nullptr;
  NonFiniteObservation* seen = nullptr;
};

// The number of forwards a slice of `examples` takes in chunks of `chunk`.
int64_t EvalForwards(int64_t examples, int chunk);

absl::StatusOr<EvalResult> Evaluate(const EvaluateArgs& args);

}  // namespace shardline

#endif  // SHARDLINE_WORKER_TRAIN_EVALUATOR_H_
