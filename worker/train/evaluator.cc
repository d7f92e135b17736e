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
namespace {

// Forwards of one rank's slice, each with the layers gathered as it reads
// them (stage 3) and given back after.
class EvalPasses {
 public:
  explicit EvalPasses(const EvaluateArgs& args) : args_(args) {
    if (sharded()) {
      hooks_.before_forward = [this](Range layer) {
        const absl::Status s = args_.exchange->AwaitParams(layer, args_.seen);
        if (failed_.ok()) failed_ = s;
      };
      args_.ws->hooks = &hooks_;
      static_cast<void>(args_.exchange->TakePeakWholeFloats());  // from here on: this evaluation's
    }
  }
  ~EvalPasses() { args_.ws->hooks = nullptr; }

  bool sharded() const { return args_.exchange != nullptr && args_.exchange->sharded_params(); }

  absl::StatusOr<BatchStats> Forward(const Examples& examples) {
    const BatchStats s = args_.model->Forward(args_.params, examples, args_.ws);
    if (sharded()) {
      const absl::Status ended = args_.exchange->EndForward(args_.seen);
      if (failed_.ok()) failed_ = ended;
    }
    if (!failed_.ok()) return failed_;
    return s;
  }

  int64_t TakePeak() { return sharded() ? args_.exchange->TakePeakWholeFloats() : 0; }

 private:
  const EvaluateArgs& args_;
  LayerHooks hooks_;
  absl::Status failed_;  // the first gather that failed
};

}  // namespace

int64_t EvalForwards(int64_t examples, int chunk) { return (examples + chunk - 1) / chunk; }

absl::StatusOr<EvalResult> Evaluate(const EvaluateArgs& args) {
  const Model& model = *args.model;
  const Dataset& data = *args.data;
  Collectives& comm = *args.comm;
  int chunk = std::max(1, args.max_examples);
  if (model.eval_chunk() > 0) chunk = std::min(chunk, model.eval_chunk());
  const Range mine = ShardRange(data.num_examples, comm.rank(), comm.world_size());
  EvalPasses passes(args);
  double sums[3] = {0, 0, 0};  // loss, correct, count
  BatchData batch;
  for (int64_t begin = mine.begin; begin < mine.end; begin += chunk) {
    const int n = static_cast<int>(std::min<int64_t>(chunk, mine.end - begin));
    RETURN_IF_ERROR(GatherRange(data, begin, n, &batch));
    ASSIGN_OR_RETURN(const BatchStats s, passes.Forward(ExamplesOf(batch, n)));
    sums[0] += s.loss_sum;
    sums[1] += static_cast<double>(s.correct);
    sums[2] += static_cast<double>(s.count);
  }
  if (passes.sharded() && data.num_examples > 0) {
    int64_t most = 0;  // the forwards of the rank with the most
    for (int r = 0; r < comm.world_size(); ++r) {
      most = std::max(most, EvalForwards(ShardRange(data.num_examples, r, comm.world_size()).size(), chunk));
    }
    for (int64_t k = EvalForwards(mine.size(), chunk); k < most; ++k) {
      RETURN_IF_ERROR(GatherRange(data, 0, 1, &batch));
      RETURN_IF_ERROR(passes.Forward(ExamplesOf(batch, 1)).status());  // for its gathers only
    }
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
  if (data.is_text()) r.bits_per_byte = r.loss / std::log(2.0) / data.bytes_per_token;
  r.peak_whole_floats = passes.TakePeak();
  return r;
}

}  // namespace shardline
