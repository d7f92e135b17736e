// Evaluation on the test split: each rank evaluates its contiguous slice
// ShardRange(num_examples, rank, world) with the current parameters, and the
// sums are combined with one scalar all-reduce, so every rank returns the
// same numbers for the whole split.
#ifndef SHARDLINE_WORKER_TRAIN_EVALUATOR_H_
#define SHARDLINE_WORKER_TRAIN_EVALUATOR_H_

#include "absl/status/statusor.h"
#include "worker/collective/collectives.h"
#include "worker/data/dataset.h"
#include "worker/model/model.h"

namespace shardline {

struct EvalResult {
  double loss = 0;      // mean cross-entropy over the split's targets (nats)
  double accuracy = 0;  // fraction of targets predicted correctly (argmax)
  int64_t count = 0;    // targets
  // Text: loss / ln 2, the bits per byte of a byte-level model; 0 otherwise.
  double bits_per_byte = 0;
};

// `batch_size` bounds memory only; results do not depend on it.
absl::StatusOr<EvalResult> Evaluate(const Model& model, const float* params, const Dataset& data,
                                    int batch_size, Collectives& comm, ModelWorkspace* ws);

}  // namespace shardline

#endif  // SHARDLINE_WORKER_TRAIN_EVALUATOR_H_
