#include "worker/train/train_step.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "absl/strings/str_format.h"
#include "common/faults/corruption.h"
#include "common/job/finite.h"
#include "common/job/shard.h"
#include "common/platform/status_macros.h"
#include "worker/collective/comm_memory.h"
#include "worker/train/audit_step.h"
#include "worker/train/exchange.h"
#include "worker/train/param_agreement.h"
#include "worker/train/step_scalars.h"

namespace shardline {
namespace {

// Adds the squares of v over the pieces' overlap with `within`, in order, to
// one running *sum.
void AddSquares(const float* v, absl::Span<const Range> pieces, Range within, double* sum) {
  for (const Range& p : pieces) {
    const Range both = Overlap(p, within);
    for (int64_t i = both.begin; i < both.end; ++i) *sum += static_cast<double>(v[i]) * v[i];
  }
}

double SumSquares(const float* v, absl::Span<const Range> pieces) {
  double sum = 0;
  AddSquares(v, pieces, Range{0, INT64_MAX}, &sum);
  return sum;
}

// Whether v is finite in every piece's overlap with `within`.
bool PiecesFinite(const PagedFloats& v, absl::Span<const Range> pieces, Range within) {
  for (const Range& p : pieces) {
    const Range both = Overlap(p, within);
    if (both.empty()) continue;
    if (!AllFinite(absl::MakeConstSpan(v.data() + both.begin, static_cast<size_t>(both.size())))) return false;
  }
  return true;
}

// The first index of `layer` outside every one of `own` (ascending,
// disjoint), or layer.end when this rank owns all of it.
int64_t FirstNotOwned(Range layer, absl::Span<const Range> own) {
  int64_t at = layer.begin;
  for (const Range& p : own) {
    if (p.end <= at) continue;
    if (p.begin > at) break;
    at = p.end;
  }
  return std::min(at, layer.end);
}

}  // namespace


std::string DescribeMemory(const MemoryHeld& m) {
  auto mib = [](int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); };
  return absl::StrFormat(
      "parameters %.2f MiB (%.2f MiB at the step's peak, %.2f MiB at an evaluation's), gradients %.1f MiB, "
      "optimizer %.1f MiB, activations %.1f MiB (evaluation +%.1f MiB), communication %.1f MiB%s (ZeRO stage %d)",
      mib(m.parameters), mib(m.parameters_peak), mib(m.evaluation_peak), mib(m.gradients), mib(m.optimizer),
      mib(m.activations), mib(m.evaluation), mib(m.communication),
      m.rounded_weights > 0 ? absl::StrFormat(", bfloat16 weights %.1f MiB", mib(m.rounded_weights)) : "",
      m.zero_stage);
}

std::string PhasesPerStep(const PhaseTimes& total, int64_t steps) {
  const double n = static_cast<double>(std::max<int64_t>(steps, 1)) / 1e3;
  std::string out =
      absl::StrFormat("compute %.1f ms, reduce-scatter %.1f ms, optimizer %.1f ms, all-gather %.1f ms",
                      total.compute / n, total.reduce_scatter / n, total.optimizer / n, total.all_gather / n);
  if (total.comm_busy > 0) {
    const double hidden = std::max(0.0, total.comm_busy - total.reduce_scatter - total.all_gather);
    absl::StrAppendFormat(&out, ", collectives %.1f ms in the background (%.1f ms hidden)", total.comm_busy / n,
                          hidden / n);
  }
  return out;
}

namespace {

// A scalar all-reduce carries finite values only: a non-finite one is sent
// as 0 (its rank has noted it; the world judges it in the same step).
double FiniteOrZero(double v) { return std::isfinite(v) ? v : 0.0; }

// What the parts of one step below share: the step's context and options,
// the state and buffers it updates, its timer and its result.
struct StepRun {
  const StepContext& ctx;
  const bool with_norms;
  TrainState* const state;
  StepBuffers* const b;
  PhaseTimer& timer;
  StepResult& r;
  AuditWork& audit;  // due: the first micro-batch's gradient is hashed into audit.own
};

// Forward/backward over this rank's slice of the step's global batch, in
// grad_accum micro-batches, writing into grads the sum over the slice of
// d(loss)/d(params) / (global_batch_size * targets per example). Returns
// the slice's loss sums and adds the time spent gathering batches to the
// step's data time; its phases are timed by the step's timer. `hooks` (may
// be null) are given to every forward, and to the last micro-batch's
// backward (model.h: LayerHooks). Fails, before any forward of the
// micro-batch, if its examples cannot be read (a token shard's bad token).
absl::StatusOr<BatchStats> ComputeGradients(StepRun& run, const LayerHooks* hooks) {
  const StepContext& ctx = run.ctx;
  const float* params = run.state->params.data();
  const int64_t step = run.r.step;
  StepBuffers* b = run.b;
  PhaseTimer* timer = &run.timer;
  double* data_seconds = &run.r.times.data;
  int64_t begin = timer->Mark();
  const int world = ctx.comm.world_size();
  const int accum = ctx.config.train().grad_accum_steps();
  if (ctx.data_world > 0) {
    ctx.pipeline.RankSlice(step, ctx.data_rank, ctx.data_world, &b->indices);
  } else {
    ctx.pipeline.RankSlice(step, ctx.comm.rank(), world, &b->indices);
  }
  // The slice in accum micro-batches of sizes differing by at most one;
  // every target's gradient is scaled by GradScale (1/(examples * targets per
  // example)), so the sum over ranks is the mean over the global batch's
  // targets however it was split.
  const int64_t slice = static_cast<int64_t>(b->indices.size());
  const float grad_scale = GradScale(ctx);
  b->grads.resize(static_cast<size_t>(ctx.model.layout().total_size()));
  if (b->workspace == nullptr) b->workspace = ctx.model.NewWorkspace();
  // Every pass may wait for parameters; only the last backward finishes
  // gradients.
  LayerHooks forward_only;  // with every parameter read announced, but no gradient final
  if (hooks != nullptr) {
    forward_only.before_forward = hooks->before_forward;
    forward_only.before_backward = hooks->before_backward;
    forward_only.before_gradient = hooks->before_gradient;
  }
  int m = 0;
  if (run.audit.due) {  // the audited first micro-batch, when it is not the last (hooks hash the last's)
    forward_only.after_backward = [&](Range p) {
      if (m == 0) run.audit.own.Add(b->grads.data() + p.begin, p.size());
    };
  }
  BatchStats total;
  for (; m < accum; ++m) {
    b->workspace->hooks = hooks == nullptr ? nullptr : m + 1 == accum ? hooks : &forward_only;
    const Range part = ShardRange(slice, m, accum);
    const int micro = static_cast<int>(part.size());
    const absl::Span<const int64_t> rows =
        absl::MakeConstSpan(b->indices).subspan(static_cast<size_t>(part.begin), static_cast<size_t>(micro));
    RETURN_IF_ERROR(Annotate(GatherBatch(ctx.train, rows, &b->batch), absl::StrCat("reading the batch of step ", step)));
    const Examples examples = ExamplesOf(b->batch, micro);
    *data_seconds += timer->Since("data", begin);
    begin = timer->Mark();
    const BatchStats s = ctx.model.Forward(params, examples, b->workspace.get());
    timer->Since("forward", begin);
    begin = timer->Mark();
    ctx.model.Backward(params, examples, grad_scale, /*accumulate=*/m > 0, b->grads.data(), b->workspace.get());
    timer->Since("backward", begin);
    begin = timer->Mark();
    total.loss_sum += s.loss_sum;
    total.correct += s.correct;
    total.count += s.count;
  }
  b->workspace->hooks = nullptr;
  return total;
}

// This rank in the whole world (an island's ring numbers its own ranks).
int WorkerRank(const StepContext& ctx) { return ctx.data_world > 0 ? ctx.data_rank : ctx.comm.rank(); }

// What the forward and backward of a step give the agreement.
struct Computed {
  double loss_sum = 0;
  uint64_t param_hash = 0;  // of every layer as the first forward read it (param_agreement.h)
};

// 1. Forward and backward of this rank's slice. The forward of each layer
// waits for the last step's gathers of it; the backward of the last
// micro-batch starts each bucket's reduce-scatter as soon as its layers are
// done (both only with collective.overlap). Each layer the first
// micro-batch's passes read is hashed as they read it, whole on every rank:
// its forward's at stage 2 and 3, its backward's at stage 3.
absl::StatusOr<Computed> ForwardBackward(StepRun& s) {
  const StepContext& ctx = s.ctx;
  TrainState* state = s.state;
  StepBuffers* b = s.b;
  PhaseTimer& timer = s.timer;
  StepResult& r = s.r;
  GradientExchange& exchange = ctx.exchange;
  NonFiniteObservation& seen = state->nonfinite;
  const int rank = ctx.comm.rank();
  const int64_t begin = timer.Mark();
  const double gather_waited = exchange.gather_wait_seconds();
  absl::Status failed;  // the first collective that failed in a hook
  auto note = [&failed](const absl::Status& s) {
    if (failed.ok()) failed = s;
  };
  // BF16: each weight rounded once for the passes (KeepRoundedWeights,
  // products.h), from the parameters as this step finds them (whatever
  // changed them since the last step: the update, a restore, an outer
  // step). At stage 3 a layer's rounding lives while the layer is whole:
  // until the next announcement.
  if (b->workspace == nullptr) b->workspace = ctx.model.NewWorkspace();
  Products& products = b->workspace->products;
  const bool per_layer = exchange.sharded_params();
  FloatHasher hasher;
  // What is hashed: every layer the first micro-batch's forward reads and,
  // at stage 3 (where the backward gathers layers again), its backward.
  enum class Pass { kFirstForward, kFirstBackward, kLater } pass = Pass::kFirstForward;
  float* params = state->params.data();
  LayerHooks hooks;
  hooks.before_forward = [&](Range layer) {
    const int64_t at = timer.Mark();
    const size_t pending = exchange.gathers_pending();
    const double waited = exchange.gather_wait_seconds();
    note(exchange.AwaitParams(layer, &seen));
    if (per_layer) products.ForgetWeights();
    if (pass == Pass::kFirstBackward) pass = Pass::kLater;
    if (pass == Pass::kFirstForward) {
      const int64_t theirs = FirstNotOwned(layer, ctx.optimizer.pieces());
      if (theirs < layer.end) MaybeCorrupt(CorruptSite::kGathered, WorkerRank(ctx), r.step, params + theirs, theirs);
      hasher.Add(params + layer.begin, layer.size());
    }
    if (exchange.gathers_pending() < pending || exchange.gather_wait_seconds() > waited) {
      timer.Since("all_gather", at);  // inside "forward"
    }
  };
  hooks.before_backward = [&](Range layer) {
    const int64_t at = timer.Mark();
    const double waited = exchange.gather_wait_seconds();
    if (pass == Pass::kFirstForward) pass = Pass::kFirstBackward;
    note(exchange.AwaitParamsForBackward(layer, &seen));
    if (per_layer) products.ForgetWeights();
    if (per_layer && pass == Pass::kFirstBackward) hasher.Add(params + layer.begin, layer.size());
    if (exchange.gather_wait_seconds() > waited) timer.Since("all_gather", at);  // inside "backward"
  };
  hooks.before_gradient = [&](Range part) { exchange.BeforeGradients(part); };
  const bool audit_last = s.audit.due && ctx.config.train().grad_accum_steps() == 1;
  hooks.after_backward = [&](Range layer) {
    if (!layer.empty()) MaybeCorrupt(CorruptSite::kGradient, WorkerRank(ctx), r.step, b->grads.data() + layer.begin, layer.begin);
    if (audit_last) s.audit.own.Add(b->grads.data() + layer.begin, layer.size());  // as sent
    note(exchange.GradientsReady(layer, &b->grads, &seen, rank, r.step));
  };
  exchange.BeginStep(r.step, &b->grads);
  absl::StatusOr<BatchStats> computed;
  {
    const KeepRoundedWeights keep(&products);
    computed = ComputeGradients(s, &hooks);
  }
  if (!failed.ok() || !computed.ok()) {
    static_cast<void>(exchange.FinishReduce(&b->grads, &seen, rank, r.step));  // the buffers are ours again
    return failed.ok() ? computed.status() : failed;
  }
  const BatchStats& stats = *computed;
  if (!std::isfinite(stats.loss_sum)) seen.Note(NonFiniteSource::kOwnGradients, rank, r.step);
  r.times.all_gather = exchange.gather_wait_seconds() - gather_waited;  // in this step's forward
  r.times.compute = timer.Since("compute", begin) - r.times.all_gather;
  return Computed{stats.loss_sum, hasher.Digest()};
}

// 3. One all-reduce of this rank's scalars: the loss, the gradient norm, the
// votes, whether anything non-finite was seen and the parameters' hash.
// Ranks that held other parameters fail the step (param_agreement.h),
// before a non-finite number is judged (it may be their consequence).
// False when the step diverged (r says how; nothing is applied); else r
// holds the agreed loss, requests and norm, and *clip_scale the clipping
// factor.
absl::StatusOr<bool> Agree(StepRun& s, const Votes& votes, const Computed& computed, float* clip_scale) {
  const StepContext& ctx = s.ctx;
  PhaseTimer& timer = s.timer;
  StepResult& r = s.r;
  const bool with_norms = s.with_norms;
  NonFiniteObservation& seen = s.state->nonfinite;
  int64_t begin = timer.Mark();
  const float clip = ctx.config.train().grad_clip_norm();
  const bool need_grad_norm = with_norms || clip > 0;
  StepScalars mine;
  mine.loss_sum = FiniteOrZero(computed.loss_sum);
  mine.grad_sq = need_grad_norm ? FiniteOrZero(SumSquares(s.b->grads.data(), ctx.optimizer.pieces())) : 0.0;
  mine.stop_vote = votes.stop;
  mine.checkpoint_vote = votes.checkpoint;
  mine.eval_vote = votes.eval;
  mine.nonfinite_seen = seen.seen();
  mine.param_hash = computed.param_hash;
  std::array<double, StepScalars::kCount> packed = mine.Pack();
  timer.Since("clip", begin);
  begin = timer.Mark();
  RETURN_IF_ERROR(ctx.comm.AllReduceScalars(absl::MakeSpan(packed), StepScalars::kOps));
  const StepScalars agreed = StepScalars::Unpack(packed);
  r.times.wait_peers = timer.Since("wait_peers", begin);
  if (agreed.params_agree) {
    RETURN_IF_ERROR(SettleAudit(ctx, s.state->params.data(), r.step, s.audit, s.b));
  } else {
    ASSIGN_OR_RETURN(const AgreementVerdict verdict, ExchangeParamHashes(ctx.comm, computed.param_hash));
    RETURN_IF_ERROR(AgreementStatus(verdict, "the parameters the step's forward read", r.step, RingWorkerRanks(ctx)));
    return absl::InternalError(absl::StrCat("the parameter hashes' halves disagreed at step ", r.step,
                                            " but every rank's hash is the same: a peer reported halves it does "
                                            "not hold"));
  }
  if (agreed.nonfinite_seen) {  // some rank saw a non-finite number: judge it together
    ASSIGN_OR_RETURN(r.nonfinite, ExchangeObservations(ctx.comm, seen));
    if (r.nonfinite.kind == NonFiniteVerdict::Kind::kPeerFault) return VerdictStatus(r.nonfinite);
    r.loss = std::numeric_limits<double>::quiet_NaN();
    return false;
  }
  r.loss = agreed.loss_sum / (static_cast<double>(StepExamples(ctx)) * ctx.train.targets_per_example());
  r.agreed_stop = agreed.stop_vote;
  r.agreed_checkpoint = agreed.checkpoint_vote;
  r.agreed_eval = agreed.eval_vote;
  *clip_scale = 1.0f;
  if (need_grad_norm) {
    r.grad_norm = std::sqrt(agreed.grad_sq);
    if (clip > 0 && r.grad_norm > clip) *clip_scale = static_cast<float>(clip / r.grad_norm);
  }
  return true;
}

// Squares summed while updating, for the norms.
struct UpdateSquares {
  double update = 0;
  double params = 0;
};

// SHARDLINE_CORRUPT's "param" and "moment" sites (common/faults/corruption.h):
// this rank's first parameter of the first bucket, and its optimizer's
// first state value, just updated and not yet gathered.
void CorruptFirstUpdated(const StepContext& ctx, TrainState* state, int64_t step, Range bucket) {
  const int rank = WorkerRank(ctx);
  for (const Range& p : ctx.optimizer.pieces()) {
    const Range both = Overlap(p, bucket);
    if (both.empty()) continue;
    MaybeCorrupt(CorruptSite::kParam, rank, step, state->params.data() + both.begin, both.begin);
    break;
  }
  const std::vector<StateBuffer*> buffers = ctx.optimizer.state();
  if (!buffers.empty() && !buffers.front()->values.empty()) {
    MaybeCorrupt(CorruptSite::kMoment, rank, step, buffers.front()->values.data(), 0);
  }
}

// 4. The update of this rank's pieces, bucket by bucket, the first first:
// each bucket's gather starts (with overlap: runs) as soon as its pieces are
// updated. Nothing here reads a bucket's pieces once its gather has started
// (the gather sends them): the parameter norm is summed bucket by bucket too.
// The "optimizer" phase runs from `begin` (the end of the reduce-scatter:
// it holds the scalars' agreement too).
absl::StatusOr<UpdateSquares> UpdateAndGather(StepRun& s, float clip_scale, int64_t begin) {
  const StepContext& ctx = s.ctx;
  const bool with_norms = s.with_norms;
  TrainState* state = s.state;
  StepBuffers* b = s.b;
  PhaseTimer& timer = s.timer;
  StepResult& r = s.r;
  GradientExchange& exchange = ctx.exchange;
  NonFiniteObservation& seen = state->nonfinite;
  const std::vector<Range>& mine = ctx.optimizer.pieces();
  r.lr = ctx.schedule(r.step);
  if (ctx.saver != nullptr) {
    const int64_t at = timer.Mark();
    ctx.saver->AwaitSnapshot();
    r.times.snapshot_wait = timer.Since("checkpoint_snapshot", at);
  }
  const int64_t update_begin = timer.Mark();
  UpdateSquares sq;
  const double gathering = exchange.gather_wait_seconds();
  for (size_t k = 0; k < exchange.buckets().size(); ++k) {
    const Range bucket = exchange.buckets()[k];
    sq.update += ctx.optimizer.Update(UpdateStep{r.step + 1, r.lr, clip_scale}, state->params.data(), b->grads.data(),
                                      with_norms, bucket);
    if (k == 0) CorruptFirstUpdated(ctx, state, r.step, bucket);
    if (!PiecesFinite(state->params, mine, bucket)) seen.Note(NonFiniteSource::kOwnUpdate, ctx.comm.rank(), r.step);
    if (with_norms) AddSquares(state->params.data(), mine, bucket, &sq.params);
    const int64_t at = timer.Mark();
    RETURN_IF_ERROR(exchange.Gather(k, &state->params, &seen, r.step));
    if (!exchange.overlapped()) timer.Since("all_gather", at);
  }
  const double gather_in_update = exchange.gather_wait_seconds() - gathering;  // without overlap
  timer.Since("update", update_begin);
  r.times.optimizer = timer.Since("optimizer", begin) - gather_in_update;
  r.times.all_gather += gather_in_update;
  return sq;
}

// 5. The update and parameter norms, agreed. Non-finite norms come from
// what this step noted; the next step (or SettleNonFinite) judges it, and
// they are reported as NaN meanwhile.
absl::Status Norms(StepRun& s, const UpdateSquares& sq) {
  const StepContext& ctx = s.ctx;
  PhaseTimer& timer = s.timer;
  StepResult& r = s.r;
  const int64_t begin = timer.Mark();
  double norms[3] = {FiniteOrZero(sq.update), FiniteOrZero(sq.params),
                     std::isfinite(sq.update) && std::isfinite(sq.params) ? 0.0 : 1.0};
  static constexpr ReduceOp kNormOps[3] = {ReduceOp::kSum, ReduceOp::kSum, ReduceOp::kMax};
  RETURN_IF_ERROR(ctx.comm.AllReduceScalars(absl::MakeSpan(norms), kNormOps));
  const double nan = std::numeric_limits<double>::quiet_NaN();
  r.update_norm = norms[2] > 0 ? nan : std::sqrt(norms[0]);
  r.param_norm = norms[2] > 0 ? nan : std::sqrt(norms[1]);
  timer.Since("norms", begin);
  return absl::OkStatus();
}

// What this rank holds after the step (resident pages of the parameters and
// gradients: at stage 3, the pieces it owns).
MemoryHeld Held(const StepContext& ctx, const TrainState& state, const StepBuffers& b) {
  MemoryHeld m;
  GradientExchange& exchange = ctx.exchange;
  m.zero_stage = exchange.sharded_params() ? 3 : 2;
  m.parameters = ResidentBytes(state.params.data(), state.params.size() * sizeof(float));
  m.gradients = ResidentBytes(b.grads.data(), b.grads.size() * sizeof(float));
  const int64_t peak_floats = exchange.sharded_params()
                                  ? PiecesSize(ctx.optimizer.pieces()) + exchange.TakePeakWholeFloats()
                                  : static_cast<int64_t>(state.params.size());
  m.parameters_peak = peak_floats * static_cast<int64_t>(sizeof(float));
  m.rounded_weights = b.workspace != nullptr ? b.workspace->products.weights().bytes() : 0;
  for (const StateBuffer* s : ctx.optimizer.state()) m.optimizer += HeldBytes(s->values);
  if (b.workspace != nullptr) m.activations = b.workspace->bytes();
  m.communication = TakePeakCommMemory();
  return m;
}

}  // namespace

std::vector<int> RingWorkerRanks(const StepContext& ctx) {
  std::vector<int> workers(static_cast<size_t>(ctx.comm.world_size()));
  const int first = WorkerRank(ctx) - ctx.comm.rank();
  for (size_t i = 0; i < workers.size(); ++i) workers[i] = first + static_cast<int>(i);
  return workers;
}

absl::StatusOr<StepResult> TrainStep(const StepContext& ctx, bool with_norms, const Votes& votes,
                                     TrainState* state, StepBuffers* b) {
  StepResult r;
  r.step = state->next_step;
  PhaseTimer timer(ctx.env, b->spans);
  const int64_t step_begin = timer.Mark();
  GradientExchange& exchange = ctx.exchange;
  const double comm_busy = exchange.comm_busy_seconds();
  // A replay audit's recomputation comes first, on the parameters the step reads.
  ASSIGN_OR_RETURN(AuditWork audit, StartAudit(ctx, r.step, state, b, timer));
  if (audit.due) timer.Since("audit", step_begin);
  StepRun run{ctx, with_norms, state, b, timer, r, audit};
  ASSIGN_OR_RETURN(const Computed computed, ForwardBackward(run));
  r.times.compute += audit.seconds;
  r.times.all_gather += audit.gather_seconds;
  // 2. Every bucket reduced; own gradients are checked as each is sent.
  const int64_t reduce_begin = timer.Mark();
  RETURN_IF_ERROR(exchange.FinishReduce(&b->grads, &state->nonfinite, ctx.comm.rank(), r.step));
  r.times.reduce_scatter = timer.Since("reduce_scatter", reduce_begin);
  if (!ctx.optimizer.pieces().empty()) {
    const int64_t at = ctx.optimizer.pieces().front().begin;
    MaybeCorrupt(CorruptSite::kReduced, WorkerRank(ctx), r.step, b->grads.data() + at, at);
  }
  const int64_t optimizer_begin = timer.Mark();
  float clip_scale = 1.0f;
  ASSIGN_OR_RETURN(const bool applied, Agree(run, votes, computed, &clip_scale));
  r.audited = audit.due;  // Agree failed the step otherwise
  if (!applied) return r;  // diverged
  ASSIGN_OR_RETURN(const UpdateSquares sq, UpdateAndGather(run, clip_scale, optimizer_begin));
  r.times.comm_busy = exchange.comm_busy_seconds() - comm_busy;
  if (with_norms) RETURN_IF_ERROR(Norms(run, sq));
  r.memory = Held(ctx, *state, *b);
  timer.Since("step", step_begin);
  state->next_step = r.step + 1;
  return r;
}

}  // namespace shardline
