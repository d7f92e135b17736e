#include "worker/train/evaluator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "common/job/shard.h"
#include "common/platform/status_macros.h"
#include "worker/data/pipeline.h"
#include "worker/train/train_step.h"

namespace shardline {

absl::StatusOr<EvalResult> Evaluate(const Model& model, const float* params, const Dataset& data,
                                    int batch_size, Collectives& comm, ModelWorkspace* ws) {
  const Range mine = ShardRange(data.num_examples, comm.rank(), comm.world_size());
  double sums[3] = {0, 0, 0};  // loss, correct, count
  BatchData batch;
  for (int64_t begin = mine.begin; begin < mine.end; begin += batch_size) {
    const int n = static_cast<int>(std::min<int64_t>(batch_size, mine.end - begin));
    GatherRange(data, begin, n, &batch);
    const BatchStats s = model.Evaluate(params, ExamplesOf(batch, n), ws);
    sums[0] += s.loss_sum;
    sums[1] += static_cast<double>(s.correct);
    sums[2] += static_cast<double>(s.count);
  }
  // Scalars travel finite: a non-finite loss (huge but finite parameters
  // can overflow the logits) goes as 0 and a count of ranks that had one.
  const bool finite_loss = std::isfinite(sums[0]);
  double all[4] = {finite_loss ? sums[0] : 0.0, sums[1], sums[2], finite_loss ? 0.0 : 1.0};
  RETURN_IF_ERROR(comm.AllReduceScalars(absl::MakeSpan(all), ReduceOp::kSum));
  EvalResult r;
  r.count = static_cast<int64_t>(all[2]);
  r.loss = all[3] > 0 ? std::numeric_limits<double>::quiet_NaN() : r.count > 0 ? all[0] / all[2] : 0;
  r.accuracy = r.count > 0 ? all[1] / all[2] : 0;
  if (data.is_text()) r.bits_per_byte = r.loss / std::log(2.0);
  return r;
}

}  // namespace shardline
