#include "worker/train/run_sizes.h"

#include <algorithm>
#include <memory>

#include "common/platform/status_macros.h"
#include "worker/model/bucket_plan.h"
#include "worker/model/model_factory.h"

namespace shardline {

InputShape InputOf(const Dataset& train) {
  InputShape s{1, train.height, train.width, train.num_classes};
  if (train.is_text()) s.sequence = train.context;
  return s;
}

absl::StatusOr<int64_t> ParameterCount(const config::JobConfig& config, const Dataset& train) {
  ASSIGN_OR_RETURN(std::unique_ptr<Model> model, CreateModel(config.model(), InputOf(train)));
  return model->layout().total_size();
}

absl::StatusOr<std::vector<Range>> GradientBuckets(const config::JobConfig& config, const Dataset& train) {
  ASSIGN_OR_RETURN(std::unique_ptr<Model> model, CreateModel(config.model(), InputOf(train)));
  return GradientBuckets(config, model->layout());
}

std::vector<Range> GradientBuckets(const config::JobConfig& config, const FlatLayout& layout) {
  return BucketPlan(layout, BucketCapFloats(config.collective().bucket_cap_mb()));
}

int MicroBatchSize(const config::JobConfig& config, int world) {
  const int64_t slice = (config.data().global_batch_size() + world - 1) / world;
  const int64_t accum = std::max(1, config.train().grad_accum_steps());
  return static_cast<int>(std::max<int64_t>(1, (slice + accum - 1) / accum));
}

int64_t TotalSteps(const config::JobConfig& config, int64_t num_examples) {
  if (config.train().has_total_steps()) return config.train().total_steps();
  return config.train().epochs() * (num_examples / config.data().global_batch_size());
}

}  // namespace shardline
