#include "worker/train/train_loop.h"

#include <algorithm>
#include <limits>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/faults/fault_injection.h"
#include "common/job/best_eval.h"
#include "common/platform/logging.h"
#include "common/platform/malloc_tuning.h"
#include "common/platform/page_memory.h"
#include "common/job/shard.h"
#include "common/platform/status_macros.h"
#include "worker/collective/overlap.h"
#include "worker/model/bucket_plan.h"
#include "worker/model/model_factory.h"
#include "worker/checkpoint/restore_state.h"
#include "worker/train/cadence.h"
#include "worker/train/evaluator.h"
#include "worker/train/nan_guard.h"
#include "worker/train/nonfinite.h"
#include "worker/train/outer_steps.h"
#include "worker/train/prepare.h"
#include "worker/train/progress.h"
#include "worker/train/train_step.h"
#include "common/platform/clock.h"

namespace shardline {
namespace {

metrics::MetricRecord TrainLine(const StepResult& r, double samples_per_second) {
  metrics::MetricRecord m;
  m.set_step(static_cast<int32_t>(r.step + 1));
  m.set_split(metrics::MetricRecord::train);
  m.set_loss(static_cast<float>(r.loss));
  m.set_lr(r.lr);
  m.set_grad_norm(static_cast<float>(r.grad_norm));
  m.set_param_norm(static_cast<float>(r.param_norm));
  m.set_update_norm(static_cast<float>(r.update_norm));
  m.set_samples_per_second(static_cast<float>(samples_per_second));
  return m;
}

metrics::MetricRecord EvalLine(const EvalPoint& e) {
  metrics::MetricRecord m;
  m.set_step(static_cast<int32_t>(e.step));
  m.set_split(metrics::MetricRecord::eval);
  m.set_loss(static_cast<float>(e.loss));
  m.set_accuracy(static_cast<float>(e.accuracy));
  m.set_train_seconds(static_cast<float>(e.train_seconds));
  if (e.bits_per_byte > 0) m.set_bits_per_byte(static_cast<float>(e.bits_per_byte));
  return m;
}

}  // namespace

const char* OverheadName(Overhead kind) {
  switch (kind) {
    case Overhead::kRestore: return "restore";
    case Overhead::kEvaluation: return "evaluation";
    case Overhead::kCheckpointStall: return "checkpoint_stall";
    case Overhead::kMemorySnapshot: return "memory_snapshot";
  }
  return "unknown";
}

namespace {

// The requests this rank votes on before `step` (train_step.h: Votes): a
// stop, a checkpoint (asked by the coordinator, or due by
// checkpoint.every_seconds in a world of one, which decides alone), an eval.
// Requests already served (at or before last_saved / last_eval) are not
// voted again.
Votes VotesBefore(const TrainOptions& options, int64_t step, int64_t last_saved, int64_t last_eval,
                  double save_seconds, const Stopwatch& since_save) {
  Votes v{kNoStep, kNoStep, kNoStep};
  if (options.stop_request != nullptr) v.stop = options.stop_request->load();
  if (options.checkpoint_request != nullptr) {
    const int64_t asked = options.checkpoint_request->load();
    if (asked > last_saved) v.checkpoint = asked;
  } else if (save_seconds > 0 && since_save.ElapsedSeconds() >= save_seconds) {
    v.checkpoint = step + 1;
  }
  if (options.eval_request != nullptr && options.eval_request->load() > last_eval) v.eval = options.eval_request->load();
  return v;
}

// Samples per second over the steps since the last train line.
class RateWindow {
 public:
  void Add(double seconds) {
    seconds_ += seconds;
    ++steps_;
  }
  double Take(int global_batch) {
    const double rate = seconds_ > 0 ? static_cast<double>(steps_) * global_batch / seconds_ : 0;
    seconds_ = 0;
    steps_ = 0;
    return rate;
  }

 private:
  double seconds_ = 0;
  int64_t steps_ = 0;
};

// What the loop's parts share in one run. RunTraining builds the objects
// it points to in dependency order; the parts below read and update it.
struct Loop {
  const config::JobConfig& config;
  const TrainOptions& options;
  const TrainingData& data;
  Prepared& p;
  Collectives& world;  // the overlapped world when there is one
  GradientExchange& exchange;
  ShardSaver& saver;
  StepBuffers& buffers;  // the step's: the evaluation runs in its workspace
  const bool lead;
  const bool show;
  TrainResult& result;
  int64_t last_saved;
  int64_t last_eval;
  Stopwatch since_save;
  RateWindow window;
  double stall_seen = 0;
};

// An evaluation on the test split in the step's workspace, in forwards no
// larger than the step's (evaluator.h): at stage 3 layer by layer. Notes
// what it held in the result's memory.
absl::StatusOr<EvalResult> EvaluateNow(Loop& l) {
  StepBuffers& b = l.buffers;
  if (b.workspace == nullptr) b.workspace = l.p.model->NewWorkspace();
  const int64_t before = b.workspace->bytes();
  EvaluateArgs args;
  args.model = l.p.model.get();
  args.params = l.p.state.params.data();
  args.data = &l.data.test;
  // No larger than a step's micro-batch: with islands the batch is cut over the world, not the island.
  const int data_world = l.p.islands.world;
  args.max_examples = std::min(l.config.data().eval_batch_size(), MicroBatchSize(l.config, data_world));
  args.comm = &l.world;
  args.ws = b.workspace.get();
  args.exchange = &l.exchange;
  args.seen = &l.p.state.nonfinite;
  ASSIGN_OR_RETURN(EvalResult e, Evaluate(args));
  MemoryHeld& m = l.result.memory;
  m.evaluation = std::max<int64_t>(m.evaluation, b.workspace->bytes() - before);
  const int64_t params = l.exchange.sharded_params()
                             ? (PiecesSize(l.p.optimizer->pieces()) + e.peak_whole_floats) * int64_t{sizeof(float)}
                             : static_cast<int64_t>(l.p.state.params.size() * sizeof(float));
  m.evaluation_peak = std::max(m.evaluation_peak, params);
  return e;
}

// One evaluation on the test split at step `at` (every rank gets the same
// numbers), offered to the best so far; rank 0 writes its line, and logs it
// when `show`. Returns the point and whether it is a new best that
// checkpoint.best_metric keeps.
struct Evaluated {
  EvalPoint point;
  bool new_best = false;
};
absl::StatusOr<Evaluated> EvaluateAt(Loop& l, int64_t at) {
  const Dataset& test = l.data.test;
  const Stopwatch watch(l.options.env);
  ASSIGN_OR_RETURN(EvalResult e, EvaluateNow(l));
  if (l.options.observer != nullptr) l.options.observer->OnOverhead(Overhead::kEvaluation, watch.ElapsedSeconds());
  Evaluated out;
  // Every rank has the same numbers and the same best so far (it is
  // restored with the checkpoint), so all agree on a new best.
  out.new_best = l.p.best->Offer(at, {e.loss, e.accuracy, e.bits_per_byte}) &&
                 !l.config.checkpoint().best_metric().empty();
  out.point = EvalPoint{at,      e.loss, e.accuracy, l.result.train_seconds, e.bits_per_byte, test.is_text(),
                        test.tokens != nullptr};
  if (l.lead && l.options.metrics != nullptr) RETURN_IF_ERROR(l.options.metrics->Write(EvalLine(out.point)));
  if (l.show) {
    SLOG(INFO) << absl::StrFormat("eval at step %d (epoch %.2f): %s loss %.4f%s, accuracy %.4f", at,
                                  static_cast<double>(at) / l.p.pipeline->steps_per_epoch(),
                                  test.is_text() ? "validation" : "test", e.loss,
                                  e.bits_per_byte > 0 ? absl::StrFormat(" (%.3f bits per byte)", e.bits_per_byte)
                                                      : std::string(),
                                  e.accuracy);
  }
  return out;
}

// With one bucket there is nothing to overlap: its reduce-scatter can only
// start when backward ends, and the next forward's first layer waits for
// its whole all-gather. The background thread would add only its
// hand-offs (W1: 6-9% of samples/s, bench/RESULTS.md), so the
// collectives stay on the training thread: the same ops, the same bits.
bool Overlapped(const config::JobConfig& config, const Collectives& comm, const Prepared& p, bool show) {
  const bool wanted = config.collective().overlap() && comm.world_size() > 1;
  const bool overlapped = wanted && p.buckets.size() > 1;
  if (show && wanted && !overlapped) {
    SLOG(INFO) << "collective.overlap: the gradients are one bucket (collective.bucket_cap_mb), so the "
                  "collectives run on the training thread";
  }
  return overlapped;
}

// This rank's shard of the state as it stands between steps.
ShardSource ShardNow(const Loop& l) {
  ShardSource source;
  source.step = l.p.state.next_step;
  source.rank = l.world.rank();
  source.world = l.world.world_size();
  if (l.options.island_rings != nullptr) {  // the world's shard numbers; the island's pieces
    const IslandPlace& place = l.options.island_rings->place;
    source.rank = place.world_rank;
    source.world = place.world;
    source.islands = place.islands;
  }
  source.layout = &l.p.model->layout();
  source.params = l.p.state.params.data();
  source.optimizer = l.p.optimizer.get();
  source.position = l.p.pipeline->Position(l.p.state.next_step);
  source.job_id = l.options.job_id;
  source.numerics = l.p.numerics;
  // Saved (and so BEST kept) only by a checkpoint.best_metric.
  if (!l.config.checkpoint().best_metric().empty()) source.best = BestSoFar{l.p.best->step(), l.p.best->value()};
  return source;
}

void ReportStall(Loop& l) {
  if (l.options.observer == nullptr || l.saver.stall_seconds() <= l.stall_seen) return;
  l.options.observer->OnOverhead(Overhead::kCheckpointStall, l.saver.stall_seconds() - l.stall_seen);
  l.stall_seen = l.saver.stall_seconds();
}

// The parameters are read beyond the next step only after every rank agrees
// they are finite (what the last update and all-gather saw is otherwise
// judged in the next step). Once per step, however many readers.
class Settle {
 public:
  explicit Settle(Loop& l) : l_(l) {}
  absl::Status operator()() {
    if (settled_) return absl::OkStatus();
    settled_ = true;
    RETURN_IF_ERROR(l_.exchange.FinishGathers(&l_.p.state.nonfinite));
    return SettleNonFinite(l_.world, l_.p.state.nonfinite);
  }

 private:
  Loop& l_;
  bool settled_ = false;
};

// After a step: the times, the NaN guard, observers and progress.
absl::Status Account(Loop& l, const StepResult& r, double seconds, const std::vector<PhaseSpan>* traced,
                     Progress& progress, NanGuard& guard) {
  l.result.train_seconds += seconds;
  l.result.phase_seconds += r.times;
  l.window.Add(seconds);
  l.result.losses.push_back(r.loss);
  if (r.audited) ++l.result.audits;
  const MemoryHeld eval = l.result.memory;  // what the evaluations held so far
  l.result.memory = r.memory;
  l.result.memory.evaluation = eval.evaluation;
  l.result.memory.evaluation_peak = eval.evaluation_peak;
  RETURN_IF_ERROR(guard.Check(r.step, r.loss, r.grad_norm));
  if (StepObserver* observer = l.options.observer; observer != nullptr) {
    StepResult shown = r;  // with what the evaluations so far held
    shown.memory = l.result.memory;
    observer->OnStep(shown, seconds);
    if (traced != nullptr) observer->OnTrace(r.step + 1, *traced);
  }
  ReportStall(l);
  if (l.options.steps_done != nullptr) l.options.steps_done->store(l.p.state.next_step);
  if (l.show) progress.Step(l.p.state.next_step, r.loss, l.result.train_seconds);
  return absl::OkStatus();
}

// A save (due, or a new best): snapshot, write and report happen in the
// background; the next step waits for the snapshot before its update.
absl::Status SaveNow(Loop& l, Settle& settle) {
  RETURN_IF_ERROR(settle());
  RETURN_IF_ERROR(l.saver.Save(ShardNow(l)));
  ReportStall(l);
  l.last_saved = l.p.state.next_step;
  l.since_save.Reset();
  return absl::OkStatus();
}

// Synchronous, at the step boundary, on every rank alike: the copy is
// memcpy-speed and the ring shift one shard (bench/RESULTS.md).
absl::Status SnapshotNow(Loop& l, Settle& settle) {
  RETURN_IF_ERROR(settle());
  const Stopwatch watch(l.options.env);
  RETURN_IF_ERROR(l.options.memory->TakeAndReplicate(ShardNow(l), l.config.checkpoint().memory_copies(), l.world));
  const double took = watch.ElapsedSeconds();
  ++l.result.memory_snapshots;
  l.result.memory_snapshot_seconds += took;
  if (l.options.observer != nullptr) l.options.observer->OnOverhead(Overhead::kMemorySnapshot, took);
  return absl::OkStatus();
}

// What is due after a step, in order: log, eval, save, snapshot. Every rank
// got the same agreed requests in the step, so all do the same here.
absl::Status ActOn(Loop& l, const Due& due, const StepResult& r, Settle& settle) {
  const int64_t at = l.p.state.next_step;
  if (due.log) {
    const double rate = l.window.Take(l.config.data().global_batch_size());
    if (l.lead && l.options.metrics != nullptr) RETURN_IF_ERROR(l.options.metrics->Write(TrainLine(r, rate)));
  }
  bool new_best = false;
  if (due.eval) {
    l.last_eval = at;
    RETURN_IF_ERROR(settle());
    ASSIGN_OR_RETURN(Evaluated e, EvaluateAt(l, at));
    l.result.evals.push_back(e.point);
    new_best = e.new_best;
  }
  bool saved = false;
  if (!l.options.checkpoint_root.empty() && (due.save || new_best) && at != l.last_saved) {
    RETURN_IF_ERROR(SaveNow(l, settle));
    saved = true;
  }
  if (due.snapshot) RETURN_IF_ERROR(SnapshotNow(l, settle));
  // What those transients freed goes back to the kernel, so the arenas of
  // the threads that made them do not keep it (malloc_tuning.h).
  if (due.eval || saved || due.snapshot) ReleaseFreedMemory();
  return absl::OkStatus();
}

ExchangeOptions ExchangeOptionsFor(const config::JobConfig& config, Env* env) {
  ExchangeOptions o;
  o.env = env;
  o.zero_stage = config.collective().zero_stage();
  o.reshard_after_forward = config.collective().reshard_after_forward();
  o.prefetch_buckets = config.collective().prefetch_buckets();
  return o;
}

StepContext StepContextFor(const config::JobConfig& config, const TrainingData& data, Prepared& p,
                           GradientExchange& exchange, Collectives& world, ShardSaver& saver,
                           const TrainOptions& options) {
  StepContext ctx{config, *p.model, data.train, *p.pipeline, exchange, *p.optimizer, *p.schedule, world,
                  &saver, options.env};
  ctx.numerics = p.numerics;
  if (options.island_rings != nullptr) {  // the world's slice of each global batch; means over the island's
    const IslandPlace& place = options.island_rings->place;
    ctx.data_rank = place.world_rank;
    ctx.data_world = place.world;
    ctx.batch_examples = IslandBatch(place, config.data().global_batch_size());
  }
  return ctx;
}

OuterStepsOptions OuterStepsFor(const config::JobConfig& config, Prepared& p, const GradientExchange& exchange,
                                Collectives& world, const TrainOptions& options, bool show) {
  OuterStepsOptions o;
  o.env = options.env;
  o.shape = p.islands;
  o.optimizer = p.outer;
  o.params = &p.state.params;
  o.buckets = &p.buckets;
  o.gather_params = !exchange.sharded_params();
  o.island = &world;
  o.across = options.island_rings != nullptr ? options.island_rings->across.get() : nullptr;
  o.wire = config.collective().diloco().wire();
  o.show = show;
  return o;
}

// After the last step: the gathers settled, the final save durable and
// reported, and an eval for a run that was restored already finished.
absl::Status Finish(Loop& l) {
  TrainState& state = l.p.state;
  Settle settle(l);
  RETURN_IF_ERROR(settle());
  RETURN_IF_ERROR(l.saver.Wait());
  TrainResult& result = l.result;
  result.checkpoint_seconds = l.saver.stall_seconds();
  if (result.evals.empty()) {
    ASSIGN_OR_RETURN(const EvalResult e, EvaluateNow(l));
    result.evals.push_back(
        EvalPoint{state.next_step, e.loss, e.accuracy, 0, e.bits_per_byte, l.data.test.is_text(),
                  l.data.test.tokens != nullptr});
  }
  result.steps = state.next_step;
  const int global_batch = l.config.data().global_batch_size();
  result.samples_per_second =
      result.train_seconds > 0
          ? static_cast<double>(result.steps - result.start_step) * global_batch / result.train_seconds
                               : 0;
  // At stage 3 this rank holds its pieces only: the whole is in the checkpoints.
  if (l.options.keep_params && !l.exchange.sharded_params()) {
    result.params.assign(state.params.begin(), state.params.end());
  }
  state.params = PagedFloats();
  result.peak_rss_bytes = PeakRssBytes();
  result.predicted_bytes = l.p.memory_plan.total();
  return absl::OkStatus();
}

}  // namespace

std::string DescribeHeld(const TrainResult& r) {
  return absl::StrFormat("held after the last step: %s; memory predicted %.1f MiB, peak %.1f MiB (RSS)",
                         DescribeMemory(r.memory), static_cast<double>(r.predicted_bytes) / (1 << 20),
                         static_cast<double>(r.peak_rss_bytes) / (1 << 20));
}

absl::StatusOr<TrainResult> RunTraining(const config::JobConfig& config, const TrainingData& data,
                                        Collectives& comm, const TrainOptions& options) {
  SCHECK(options.env != nullptr) << "TrainOptions.env is required";
  ASSIGN_OR_RETURN(Prepared p, Prepare(config, data, comm, options));
  TrainState& state = p.state;
  const int64_t start_step = state.next_step;
  // Declared after everything a background save reads (params, optimizer),
  // so on every return it is destroyed, and waits for its thread, first.
  ShardSaver saver(options.env, options.checkpoint_root, options.checkpoint_sink, config.checkpoint().async());
  const bool lead = comm.rank() == 0;
  const bool show = options.show_progress && lead;
  if (lead && !options.checkpoint_root.empty()) {  // the workdir keeps the tokenizer its checkpoints name
    RETURN_IF_ERROR(KeepTokenizer(options.env, data, DirName(options.checkpoint_root)));
  }
  Announce(config, p, comm, show, options.observer);
  Progress progress(p.total_steps, p.pipeline->steps_per_epoch(), config.data().global_batch_size(),
                    config.train().log_every());
  NanGuard guard;
  StepBuffers buffers;
  // Declared after the state and buffers its background collectives use, so
  // destroyed (waiting for them) first. From here on everything talks to
  // the world through `world`: its plain calls wait for those collectives.
  std::unique_ptr<OverlapCollectives> overlap;
  if (Overlapped(config, comm, p, show)) overlap = std::make_unique<OverlapCollectives>(&comm, options.env);
  Collectives& world = overlap != nullptr ? static_cast<Collectives&>(*overlap) : comm;
  GradientExchange exchange(p.buckets, world, overlap.get(), ExchangeOptionsFor(config, options.env));
  exchange.BindParams(&state.params);  // at stage 3: this rank's pieces from here on
  const StepContext ctx = StepContextFor(config, data, p, exchange, world, saver, options);
  OuterSteps outer(OuterStepsFor(config, p, exchange, world, options, show));
  TrainResult result;
  result.flops_per_example = p.model->TrainFlopsPerExample();
  result.start_step = start_step;
  Loop l{config, options, data, p, world, exchange, saver, buffers, lead, show, result,
         start_step, start_step, Stopwatch(options.env), RateWindow()};
  const CadenceOptions cadence =
      CadenceFromConfig(config, p.total_steps, /*memory_snapshots=*/options.memory != nullptr && comm.world_size() > 1);
  const std::set<int64_t> trace_steps(config.train().trace_steps().begin(), config.train().trace_steps().end());
  std::vector<PhaseSpan> spans;

  while (state.next_step < p.total_steps) {
    // 1. The step, with this rank's votes.
    const int64_t step = state.next_step;
    const Votes votes =
        VotesBefore(options, step, l.last_saved, l.last_eval, config.checkpoint().every_seconds(), l.since_save);
    const Stopwatch step_watch(options.env);
    const bool traced = options.observer != nullptr && trace_steps.count(step + 1) > 0;
    spans.clear();
    buffers.spans = traced ? &spans : nullptr;
    ASSIGN_OR_RETURN(StepResult r, TrainStep(ctx, LogDue(cadence, step + 1), votes, &state, &buffers));
    if (r.nonfinite.kind == NonFiniteVerdict::Kind::kDiverged) {
      return guard.Diverged(r.step, absl::StrCat("rank ", r.nonfinite.rank, "'s ",
                                                 DescribeSource(r.nonfinite.evidence.source)));
    }
    // 2. Islands: the outer step when due; requests act only there.
    Settle settle(l);
    ASSIGN_OR_RETURN(const AgreedRequests agreed,
                     outer.After(state.next_step, p.total_steps,
                                 AgreedRequests{r.agreed_stop, r.agreed_checkpoint, r.agreed_eval}, std::ref(settle)));
    if (outer.taken().has_value() && options.observer != nullptr) options.observer->OnOuterStep(*outer.taken());
    // 3. What is due after it (the same on every rank), then accounting.
    const double seconds = step_watch.ElapsedSeconds();
    const Due due = DueAfter(cadence, state.next_step, agreed);
    if (due.stop) CrashPoint("stopping", state.next_step);  // before the final eval and save
    RETURN_IF_ERROR(Account(l, r, seconds, traced ? &spans : nullptr, progress, guard));
    // 4. Log, eval, save, snapshot; then stop if asked.
    RETURN_IF_ERROR(ActOn(l, due, r, settle));
    if (due.stop) {
      result.stopped_early = true;
      if (show) SLOG(INFO) << "stopping at step " << state.next_step << " as requested";
      break;
    }
  }
  if (show) progress.Finish();
  result.outer_steps = outer.steps();
  result.outer_bytes_sent = outer.bytes_sent();
  result.outer_seconds = outer.seconds();
  RETURN_IF_ERROR(Finish(l));
  return result;
}

std::string DescribeFinalEval(const EvalPoint& e) {
  if (e.text) {
    return absl::StrFormat("final validation next-%s accuracy %.4f, %.3f bits per byte", e.tokens ? "token" : "byte",
                           e.accuracy, e.bits_per_byte);
  }
  return absl::StrFormat("final test accuracy %.4f", e.accuracy);
}

}  // namespace shardline
