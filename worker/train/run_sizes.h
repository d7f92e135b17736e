// A run's sizes as its config and data set make them, the same on every
// rank and in `shardline plan`: micro-batch, steps, an example's shape,
// parameters, and the gradient buckets every rank's pieces are cut from.
#ifndef SHARDLINE_WORKER_TRAIN_RUN_SIZES_H_
#define SHARDLINE_WORKER_TRAIN_RUN_SIZES_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/job/shard.h"
#include "proto/config.pb.h"
#include "worker/data/dataset.h"
#include "worker/model/model.h"

namespace shardline {

// The largest micro-batch any rank's step runs in a world of `world`:
// ceil(ceil(global_batch_size / world) / grad_accum_steps). Evaluation's
// forwards are no larger (it runs in the step's workspace).
int MicroBatchSize(const config::JobConfig& config, int world);

// Number of steps the config asks for on a training split of `num_examples`.
int64_t TotalSteps(const config::JobConfig& config, int64_t num_examples);

// The shape of one example of `train`, as models take it.
InputShape InputOf(const Dataset& train);

// Number of parameters of the config's model on `train`'s shapes; fails as
// CreateModel does.
absl::StatusOr<int64_t> ParameterCount(const config::JobConfig& config, const Dataset& train);

// The gradient buckets of the model `config` builds for `train`'s examples
// (worker/model/bucket_plan.h, cut at collective.bucket_cap_mb): what every
// rank's pieces (common/job/shard.h: OwnedPieces) are cut from.
absl::StatusOr<std::vector<Range>> GradientBuckets(const config::JobConfig& config, const Dataset& train);
// The same for a model already built: its layout cut at the config's cap.
std::vector<Range> GradientBuckets(const config::JobConfig& config, const FlatLayout& layout);

}  // namespace shardline

#endif  // SHARDLINE_WORKER_TRAIN_RUN_SIZES_H_
