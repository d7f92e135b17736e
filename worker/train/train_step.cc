#include "worker/train/train_step.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace shardline {
namespace {

double SumSquares(const float* v, int64_t n) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(v[i]) * v[i];
  return sum;
}

class Stopwatch {
 public:
  // Seconds since the last call (or construction).
  double Lap() {
    const auto now = std::chrono::steady_clock::now();
    const double s = std::chrono::duration<double>(now - last_).count();
    last_ = now;
    return s;
  }

 private:
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

}  // namespace

BatchStats ComputeGradients(const StepContext& ctx, const float* params, int64_t step,
                            StepBuffers* b) {
  const int world = ctx.comm.world_size();
  const int accum = ctx.config.train().grad_accum_steps();
  const int global_batch = ctx.config.data().global_batch_size();
  const int micro = global_batch / world / accum;
  const int dim = ctx.train.feature_dim;
  ctx.pipeline.RankSlice(step, ctx.comm.rank(), world, &b->indices);
  b->x.resize(static_cast<size_t>(micro) * dim);
  b->y.resize(static_cast<size_t>(micro));
  b->grads.resize(static_cast<size_t>(ctx.model.layout().total_size()));
  BatchStats total;
  for (int m = 0; m < accum; ++m) {
    const absl::Span<const int32_t> rows =
        absl::MakeConstSpan(b->indices).subspan(static_cast<size_t>(m) * micro, micro);
    GatherBatch(ctx.train, rows, b->x.data(), b->y.data());
    const BatchStats s = ctx.model.ForwardBackward(params, b->x.data(), b->y.data(), micro,
                                                   1.0f / global_batch, /*accumulate=*/m > 0,
                                                   b->grads.data(), &b->workspace);
    total.loss_sum += s.loss_sum;
    total.correct += s.correct;
    total.count += s.count;
  }
  return total;
}

std::string PhasesPerStep(const PhaseTimes& total, int64_t steps) {
  const double n = static_cast<double>(std::max<int64_t>(steps, 1)) / 1e3;
  return absl::StrFormat("compute %.1f ms, reduce-scatter %.1f ms, optimizer %.1f ms, all-gather %.1f ms",
                         total.compute / n, total.reduce_scatter / n, total.optimizer / n, total.all_gather / n);
}

namespace {

// A vote as a value for the min-reduction: no request is larger than any.
double VoteScalar(int64_t step) {
  return step == kNoStep ? std::numeric_limits<double>::infinity() : static_cast<double>(step);
}
int64_t AgreedStep(double reduced) { return std::isinf(reduced) ? kNoStep : static_cast<int64_t>(reduced); }

}  // namespace

absl::StatusOr<StepResult> TrainStep(const StepContext& ctx, bool with_norms, const Votes& votes,
                                     TrainState* state, StepBuffers* b) {
  StepResult r;
  r.step = state->next_step;
  Stopwatch watch;

  const BatchStats stats = ComputeGradients(ctx, state->params.data(), r.step, b);
  r.times.compute = watch.Lap();

  RETURN_IF_ERROR(ctx.comm.ReduceScatter(absl::MakeSpan(b->grads)));
  r.times.reduce_scatter = watch.Lap();

  const Range shard = ctx.optimizer.shard();
  const float clip = ctx.config.train().grad_clip_norm();
  const bool need_grad_norm = with_norms || clip > 0;
  double scalars[5] = {stats.loss_sum,
                       need_grad_norm ? SumSquares(b->grads.data() + shard.begin, shard.size()) : 0.0,
                       VoteScalar(votes.stop), VoteScalar(votes.checkpoint), VoteScalar(votes.eval)};
  static constexpr ReduceOp kOps[5] = {ReduceOp::kSum, ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMin,
                                       ReduceOp::kMin};
  RETURN_IF_ERROR(ctx.comm.AllReduceScalars(absl::MakeSpan(scalars), kOps));
  r.loss = scalars[0] / ctx.config.data().global_batch_size();
  r.agreed_stop = AgreedStep(scalars[2]);
  r.agreed_checkpoint = AgreedStep(scalars[3]);
  r.agreed_eval = AgreedStep(scalars[4]);
  float clip_scale = 1.0f;
  if (need_grad_norm) {
    r.grad_norm = std::sqrt(scalars[1]);
    if (clip > 0 && r.grad_norm > clip) clip_scale = static_cast<float>(clip / r.grad_norm);
  }

  r.lr = ctx.schedule(r.step);
  if (ctx.saver != nullptr) ctx.saver->AwaitSnapshot();
  const double update_sq = ctx.optimizer.Update(r.step + 1, r.lr, clip_scale,
                                                state->params.data() + shard.begin,
                                                b->grads.data() + shard.begin, with_norms);
  r.times.optimizer = watch.Lap();

  RETURN_IF_ERROR(ctx.comm.AllGather(absl::MakeSpan(state->params)));
  r.times.all_gather = watch.Lap();

  if (with_norms) {
    double norms[2] = {update_sq, SumSquares(state->params.data() + shard.begin, shard.size())};
    RETURN_IF_ERROR(ctx.comm.AllReduceScalars(absl::MakeSpan(norms), ReduceOp::kSum));
    r.update_norm = std::sqrt(norms[0]);
    r.param_norm = std::sqrt(norms[1]);
  }
  state->next_step = r.step + 1;
  return r;
}

}  // namespace shardline
