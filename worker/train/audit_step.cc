#include "worker/train/audit_step.h"

#include <array>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/job/shard.h"
#include "common/platform/clock.h"
#include "common/platform/status_macros.h"
#include "worker/train/audit.h"
#include "worker/train/exchange.h"
#include "worker/train/param_agreement.h"

namespace shardline {
namespace {

// The data slice of ring rank `r`: an island's ring reads the world's
// slices of its own workers.
void SliceOf(const StepContext& ctx, int64_t step, int r, std::vector<int64_t>* indices) {
  if (ctx.data_world > 0) {
    ctx.pipeline.RankSlice(step, ctx.data_rank - ctx.comm.rank() + r, ctx.data_world, indices);
  } else {
    ctx.pipeline.RankSlice(step, r, ctx.comm.world_size(), indices);
  }
}

std::vector<int> Targets(const StepContext& ctx, int64_t step) {
  std::vector<int> targets(static_cast<size_t>(ctx.comm.world_size()));
  for (size_t r = 0; r < targets.size(); ++r) {
    targets[r] = AuditTarget(ctx.config.seed(), step, ctx.config.audit().every_steps(), static_cast<int>(r),
                             ctx.comm.world_size());
  }
  return targets;
}

}  // namespace

absl::StatusOr<uint64_t> RecomputeFirstMicroBatch(const StepContext& ctx, const float* params, int64_t step,
                                                  int target, StepBuffers* b) {
  std::vector<int64_t> indices;
  SliceOf(ctx, step, target, &indices);
  const int accum = ctx.config.train().grad_accum_steps();
  const Range part = ShardRange(static_cast<int64_t>(indices.size()), 0, accum);
  const int micro = static_cast<int>(part.size());
  RETURN_IF_ERROR(Annotate(GatherBatch(ctx.train, absl::MakeConstSpan(indices).subspan(0, static_cast<size_t>(micro)),
                                       &b->batch),
                           absl::StrCat("reading rank ", target, "'s batch of step ", step, " to audit it")));
  const Examples examples = ExamplesOf(b->batch, micro);
  const float grad_scale = GradScale(ctx);
  b->grads.resize(static_cast<size_t>(ctx.model.layout().total_size()));
  if (b->workspace == nullptr) b->workspace = ctx.model.NewWorkspace();
  FloatHasher hash;
  LayerHooks hooks;
  hooks.after_backward = [&](Range p) { hash.Add(b->grads.data() + p.begin, p.size()); };
  b->workspace->hooks = &hooks;
  ctx.model.Forward(params, examples, b->workspace.get());
  ctx.model.Backward(params, examples, grad_scale, /*accumulate=*/false, b->grads.data(), b->workspace.get());
  b->workspace->hooks = nullptr;
  return hash.Digest();
}

absl::StatusOr<AuditWork> StartAudit(const StepContext& ctx, int64_t step, TrainState* state, StepBuffers* b,
                                     PhaseTimer& timer) {
  AuditWork w;
  w.due = AuditDue(ctx.config, ctx.comm.world_size(), step);
  if (!w.due) return w;
  const int64_t begin = timer.Mark();
  RETURN_IF_ERROR(ctx.exchange.FinishGathers(&state->nonfinite));
  w.gather_seconds = timer.Since("all_gather", begin);
  const Stopwatch took(ctx.env);
  w.target = AuditTarget(ctx.config.seed(), step, ctx.config.audit().every_steps(), ctx.comm.rank(),
                         ctx.comm.world_size());
  ASSIGN_OR_RETURN(w.audited, RecomputeFirstMicroBatch(ctx, state->params.data(), step, w.target, b));
  w.seconds = took.ElapsedSeconds();
  return w;
}

absl::Status SettleAudit(const StepContext& ctx, const float* params, int64_t step, const AuditWork& work,
                         StepBuffers* b) {
  if (!work.due) return absl::OkStatus();
  const int rank = ctx.comm.rank();
  ASSIGN_OR_RETURN(const AuditRound round,
                   ExchangeAuditHashes(ctx.comm, work.own.Digest(), work.audited, ctx.numerics));
  const std::vector<int> targets = Targets(ctx, step);
  const std::vector<int> mismatched = Mismatches(round, targets);
  if (mismatched.empty()) return absl::OkStatus();
  AuditVerdict verdict;
  const int auditor = mismatched.front(), target = targets[static_cast<size_t>(auditor)];
  const int arbiter = Arbiter(round, auditor, target);
  if (arbiter >= 0) {
    // The lowest mismatched pair, arbitrated by a third rank's recomputation.
    uint64_t mine = 0;
    if (rank == arbiter) {
      ASSIGN_OR_RETURN(mine, RecomputeFirstMicroBatch(ctx, params, step, target, b));
    }
    std::array<double, 2> halves = {rank == arbiter ? HashHigh(mine) : 0.0, rank == arbiter ? HashLow(mine) : 0.0};
    RETURN_IF_ERROR(ctx.comm.AllReduceScalars(absl::MakeSpan(halves), ReduceOp::kSum));
    verdict = Arbitrate(round, auditor, target, arbiter, HashFromHalves(halves[0], halves[1]));
  } else {
    // No third rank on the same kernels (two ranks): each computes again
    // what it computed, its own and its target's.
    ASSIGN_OR_RETURN(const uint64_t own_again, RecomputeFirstMicroBatch(ctx, params, step, rank, b));
    ASSIGN_OR_RETURN(const uint64_t audited_again, RecomputeFirstMicroBatch(ctx, params, step, work.target, b));
    ASSIGN_OR_RETURN(const AuditRound replay, ExchangeAuditHashes(ctx.comm, own_again, audited_again, ctx.numerics));
    verdict = JudgeReplay(round, replay, targets);
  }
  return AuditStatus(verdict, step, ctx.data_world > 0 ? RingWorkerRanks(ctx) : std::vector<int>());
}

}  // namespace shardline
