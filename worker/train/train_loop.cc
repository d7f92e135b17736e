#include "worker/train/train_loop.h"

#include <limits>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/faults/fault_injection.h"
#include "common/job/best_eval.h"
#include "common/platform/logging.h"
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

int64_t TotalSteps(const config::JobConfig& config, int64_t num_examples) {
  if (config.train().has_total_steps()) return config.train().total_steps();
  return config.train().epochs() * (num_examples / config.data().global_batch_size());
}

namespace {

// What RunTraining builds before its first step: the model, the optimizer of
// this rank's pieces, the pipeline and schedule, and the state initialised
// (a pure function of the seed) or restored.
struct Prepared {
  std::unique_ptr<Model> model;
  int64_t total_steps = 0;
  std::vector<Range> buckets;
  std::unique_ptr<Optimizer> optimizer;
  std::unique_ptr<BatchPipeline> pipeline;
  std::unique_ptr<LrSchedule> schedule;
  TrainState state;
  std::unique_ptr<BestEval> best;  // with a checkpoint.best_metric, saved in every shard and kept as BEST
};

absl::StatusOr<Prepared> Prepare(const config::JobConfig& config, const TrainingData& data, Collectives& comm,
                                 const TrainOptions& options) {
  const int global_batch = config.data().global_batch_size();
  if (global_batch > data.train.num_examples) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "config field data.global_batch_size: %d exceeds the %d training examples", global_batch,
        data.train.num_examples));
  }
  Prepared p;
  ASSIGN_OR_RETURN(p.model, CreateModel(config.model(), InputOf(data.train)));
  const FlatLayout& layout = p.model->layout();
  p.total_steps = TotalSteps(config, data.train.num_examples);
  if (p.total_steps > std::numeric_limits<int32_t>::max()) {
    // metrics.jsonl writes steps as JSON numbers through an int32 field.
    return absl::InvalidArgumentError(absl::StrFormat(
        "config fields train.total_steps / train.epochs: %d steps is more than the %d a run may have", p.total_steps,
        std::numeric_limits<int32_t>::max()));
  }
  p.buckets = GradientBuckets(config, layout);
  ASSIGN_OR_RETURN(p.optimizer, Optimizer::Create(config.optimizer(), layout,
                                                  OwnedPieces(p.buckets, comm.rank(), comm.world_size())));
  p.pipeline = std::make_unique<BatchPipeline>(data.train.num_examples, global_batch, config.data().shuffle_seed());
  p.schedule = std::make_unique<LrSchedule>(config.schedule(), p.total_steps);
  p.best = std::make_unique<BestEval>(config.checkpoint());
  p.state.params.resize(static_cast<size_t>(layout.total_size()));
  // A restore from memory writes every parameter (own pieces, then the
  // all-gather of every bucket): initialising them first would only add
  // seconds to a recovery at large models.
  if (options.memory_restore_step <= 0) p.model->InitRange(config.seed(), Range{0, layout.total_size()}, p.state.params.data());
  RestoreSource source;
  source.env = options.env;
  source.memory_step = options.memory_restore_step;
  source.memory_world = options.memory_restore_world;
  source.memory = options.memory;
  source.disk_dir = options.restore_dir;
  source.init_from = config.checkpoint().init_from();
  ASSIGN_OR_RETURN(RestoredState restored, RestoreState(source, layout, p.buckets, comm,
                                                        absl::MakeSpan(p.state.params), p.optimizer.get()));
  if (restored.restored.has_value()) {
    const Restored& r = *restored.restored;
    ASSIGN_OR_RETURN(p.state.next_step, p.pipeline->Restore(r.position));
    if (p.state.next_step != r.step) {
      return absl::DataLossError(
          restored.from_memory
              ? absl::StrFormat("in-memory snapshot of step %d has the data position of step %d", r.step,
                                p.state.next_step)
              : absl::StrFormat("%s: saved at step %d but its data position is step %d", options.restore_dir, r.step,
                                p.state.next_step));
    }
    p.best->Reset(r.best.step, r.best.value);
    if (options.observer != nullptr) options.observer->OnOverhead(Overhead::kRestore, restored.seconds);
  }
  return p;
}

const char* FamilyName(const config::ModelConfig& m) {
  return m.has_gpt() ? "a GPT" : m.has_vit() ? "a ViT" : m.has_cnn() ? "a CNN" : "an MLP";
}

// Says what the run is: in the log (rank 0) and to the observer.
void Announce(const config::JobConfig& config, const Prepared& p, const Collectives& comm, bool show,
              StepObserver* observer) {
  const Model& model = *p.model;
  if (show) {
    SLOG(INFO) << absl::StrFormat(
        "training %d steps (%d per epoch, global batch %d) of %s with %d parameters, "
        "%d training FLOPs per example, world size %d",
        p.total_steps, p.pipeline->steps_per_epoch(), config.data().global_batch_size(), FamilyName(config.model()),
        model.layout().total_size(), model.TrainFlopsPerExample(), comm.world_size());
  }
  if (observer == nullptr) return;
  RunInfo info;
  info.rank = comm.rank();
  info.world_size = comm.world_size();
  info.total_steps = p.total_steps;
  info.parameters = model.layout().total_size();
  info.owned_parameters = p.optimizer->size();
  for (const StateBuffer* b : p.optimizer->state()) info.optimizer_state_floats += static_cast<int64_t>(b->values.size());
  info.flops_per_example = model.TrainFlopsPerExample();
  info.global_batch_size = config.data().global_batch_size();
  observer->OnStart(info);
}

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

// One evaluation on the test split at `step` (every rank gets the same
// numbers), offered to `best`; rank 0 writes its line, and logs it when
// `show`. Returns the point and whether it is a new best that
// checkpoint.best_metric keeps.
struct Evaluated {
  EvalPoint point;
  bool new_best = false;
};
absl::StatusOr<Evaluated> EvaluateAt(const config::JobConfig& config, const Model& model, const Dataset& test,
                                     const float* params, int64_t step, double train_seconds, int64_t steps_per_epoch,
                                     Collectives& world, ModelWorkspace* ws, BestEval* best,
                                     const TrainOptions& options, bool lead, bool show) {
  const Stopwatch watch(options.env);
  ASSIGN_OR_RETURN(EvalResult e, Evaluate(model, params, test, config.data().eval_batch_size(), world, ws));
  if (options.observer != nullptr) options.observer->OnOverhead(Overhead::kEvaluation, watch.ElapsedSeconds());
  Evaluated out;
  // Every rank has the same numbers and the same best so far (it is
  // restored with the checkpoint), so all agree on a new best.
  out.new_best = best->Offer(step, {e.loss, e.accuracy, e.bits_per_byte}) && !config.checkpoint().best_metric().empty();
  out.point = EvalPoint{step, e.loss, e.accuracy, train_seconds, e.bits_per_byte};
  if (lead && options.metrics != nullptr) RETURN_IF_ERROR(options.metrics->Write(EvalLine(out.point)));
  if (show) {
    SLOG(INFO) << absl::StrFormat("eval at step %d (epoch %.2f): %s loss %.4f%s, accuracy %.4f", step,
                                  static_cast<double>(step) / steps_per_epoch, test.is_text() ? "validation" : "test",
                                  e.loss,
                                  e.bits_per_byte > 0 ? absl::StrFormat(" (%.3f bits per byte)", e.bits_per_byte)
                                                      : std::string(),
                                  e.accuracy);
  }
  return out;
}

}  // namespace

absl::StatusOr<TrainResult> RunTraining(const config::JobConfig& config, const TrainingData& data,
                                        Collectives& comm, const TrainOptions& options) {
  ASSIGN_OR_RETURN(Prepared p, Prepare(config, data, comm, options));
  const Model& model = *p.model;
  TrainState& state = p.state;
  BatchPipeline& pipeline = *p.pipeline;
  const int global_batch = config.data().global_batch_size();
  const int64_t start_step = state.next_step;
  // Declared after everything a background save reads (params, optimizer),
  // so on every return it is destroyed, and waits for its thread, first.
  ShardSaver saver(options.env, options.checkpoint_root, options.checkpoint_sink, config.checkpoint().async());
  StepObserver* const observer = options.observer;
  const bool lead = comm.rank() == 0;
  const bool show = options.show_progress && lead;
  Announce(config, p, comm, show, observer);
  Progress progress(p.total_steps, pipeline.steps_per_epoch(), global_batch, config.train().log_every());
  NanGuard guard;
  StepBuffers buffers;
  // With one bucket there is nothing to overlap: its reduce-scatter can only
  // start when backward ends, and the next forward's first layer waits for
  // its whole all-gather. The background thread would add only its
  // hand-offs (W1: 6-9% of samples/s, bench/RESULTS.md), so the
  // collectives stay on the training thread: the same ops, the same bits.
  const bool overlapped = config.collective().overlap() && comm.world_size() > 1 && p.buckets.size() > 1;
  if (show && config.collective().overlap() && comm.world_size() > 1 && !overlapped) {
    SLOG(INFO) << "collective.overlap: the gradients are one bucket (collective.bucket_cap_mb), so the "
                  "collectives run on the training thread";
  }
  // Declared after the state and buffers its background collectives use, so
  // destroyed (waiting for them) first. From here on everything talks to
  // the world through `world`: its plain calls wait for those collectives.
  std::unique_ptr<OverlapCollectives> overlap;
  if (overlapped) overlap = std::make_unique<OverlapCollectives>(&comm);
  Collectives& world = overlap != nullptr ? static_cast<Collectives&>(*overlap) : comm;
  GradientExchange exchange(p.buckets, world, overlap.get());
  const StepContext ctx{config, model, data.train, pipeline, exchange, *p.optimizer, *p.schedule, world, &saver,
                        options.env};
  const std::unique_ptr<ModelWorkspace> eval_ws = model.NewWorkspace();
  TrainResult result;
  result.flops_per_example = model.TrainFlopsPerExample();
  result.start_step = start_step;
  const CadenceOptions cadence =
      CadenceFromConfig(config, p.total_steps, /*memory_snapshots=*/options.memory != nullptr && comm.world_size() > 1);
  int64_t last_saved = start_step;
  int64_t last_eval = start_step;
  Stopwatch since_save(options.env);
  RateWindow window;
  const std::set<int64_t> trace_steps(config.train().trace_steps().begin(), config.train().trace_steps().end());
  std::vector<PhaseSpan> spans;
  double stall_seen = 0;
  // This rank's shard of the state as it stands between steps.
  auto shard_now = [&] {
    ShardSource source;
    source.step = state.next_step;
    source.rank = comm.rank();
    source.world = comm.world_size();
    source.layout = &model.layout();
    source.params = state.params.data();
    source.optimizer = p.optimizer.get();
    source.position = pipeline.Position(state.next_step);
    source.job_id = options.job_id;
    // Saved (and so BEST kept) only by a checkpoint.best_metric.
    if (!config.checkpoint().best_metric().empty()) source.best = BestSoFar{p.best->step(), p.best->value()};
    return source;
  };
  auto report_stall = [&] {
    if (observer == nullptr || saver.stall_seconds() <= stall_seen) return;
    observer->OnOverhead(Overhead::kCheckpointStall, saver.stall_seconds() - stall_seen);
    stall_seen = saver.stall_seconds();
  };

  while (state.next_step < p.total_steps) {
    // 1. The step, with this rank's votes.
    const int64_t step = state.next_step;
    const Votes votes =
        VotesBefore(options, step, last_saved, last_eval, config.checkpoint().every_seconds(), since_save);
    const Stopwatch step_watch(options.env);
    const bool traced = observer != nullptr && trace_steps.count(step + 1) > 0;
    spans.clear();
    buffers.spans = traced ? &spans : nullptr;
    ASSIGN_OR_RETURN(StepResult r, TrainStep(ctx, LogDue(cadence, step + 1), votes, &state, &buffers));
    if (r.nonfinite.kind == NonFiniteVerdict::Kind::kDiverged) {
      return guard.Diverged(r.step, absl::StrCat("rank ", r.nonfinite.rank, "'s ",
                                                 DescribeSource(r.nonfinite.evidence.source)));
    }
    // 2. What is due after it: every rank got the same agreed requests in
    // this step, so all do the same below (and stop here alike).
    const double seconds = step_watch.ElapsedSeconds();
    const Due due = DueAfter(cadence, state.next_step, {r.agreed_stop, r.agreed_checkpoint, r.agreed_eval});
    if (due.stop) CrashPoint("stopping", state.next_step);  // before the final eval and save
    // 3. Accounting: times, the NaN guard, observers, progress.
    result.train_seconds += seconds;
    result.phase_seconds += r.times;
    window.Add(seconds);
    result.losses.push_back(r.loss);
    RETURN_IF_ERROR(guard.Check(r.step, r.loss, r.grad_norm));
    if (observer != nullptr) {
      observer->OnStep(r, seconds);
      if (traced) observer->OnTrace(step + 1, spans);
    }
    report_stall();
    if (options.steps_done != nullptr) options.steps_done->store(state.next_step);
    if (show) progress.Step(state.next_step, r.loss, result.train_seconds);
    // The parameters are read beyond the next step only after every rank
    // agrees they are finite (what the last update and all-gather saw is
    // otherwise judged in the next step).
    bool settled = false;
    auto settle = [&]() -> absl::Status {
      if (settled) return absl::OkStatus();
      settled = true;
      RETURN_IF_ERROR(exchange.FinishGathers(&state.nonfinite));
      return SettleNonFinite(world, state.nonfinite);
    };
    // 4. Log, eval, save, snapshot, stop: in that order.
    if (due.log) {
      const double rate = window.Take(global_batch);
      if (lead && options.metrics != nullptr) RETURN_IF_ERROR(options.metrics->Write(TrainLine(r, rate)));
    }
    bool new_best = false;
    if (due.eval) {
      last_eval = state.next_step;
      RETURN_IF_ERROR(settle());
      ASSIGN_OR_RETURN(Evaluated e, EvaluateAt(config, model, data.test, state.params.data(), state.next_step,
                                               result.train_seconds, pipeline.steps_per_epoch(), world, eval_ws.get(),
                                               p.best.get(), options, lead, show));
      result.evals.push_back(e.point);
      new_best = e.new_best;
    }
    if (!options.checkpoint_root.empty() && (due.save || new_best) && state.next_step != last_saved) {
      // Snapshot, write and report happen in the background; the next
      // step waits for the snapshot before its optimizer update.
      RETURN_IF_ERROR(settle());
      RETURN_IF_ERROR(saver.Save(shard_now()));
      report_stall();
      last_saved = state.next_step;
      since_save.Reset();
    }
    if (due.snapshot) {
      // Synchronous, at the step boundary, on every rank alike: the copy is
      // memcpy-speed and the ring shift one shard (bench/RESULTS.md).
      RETURN_IF_ERROR(settle());
      const Stopwatch snapshot_watch(options.env);
      RETURN_IF_ERROR(options.memory->TakeAndReplicate(shard_now(), config.checkpoint().memory_copies(), world));
      const double took = snapshot_watch.ElapsedSeconds();
      ++result.memory_snapshots;
      result.memory_snapshot_seconds += took;
      if (observer != nullptr) observer->OnOverhead(Overhead::kMemorySnapshot, took);
    }
    if (due.stop) {
      result.stopped_early = true;
      if (show) SLOG(INFO) << "stopping at step " << state.next_step << " as requested";
      break;
    }
  }
  if (show) progress.Finish();
  // Before the final parameters are read.
  RETURN_IF_ERROR(exchange.FinishGathers(&state.nonfinite));
  RETURN_IF_ERROR(SettleNonFinite(world, state.nonfinite));
  RETURN_IF_ERROR(saver.Wait());  // the final save is durable and reported before we return
  result.checkpoint_seconds = saver.stall_seconds();
  if (result.evals.empty()) {  // restored a finished run: report where it stands
    ASSIGN_OR_RETURN(EvalResult e, Evaluate(model, state.params.data(), data.test,
                                            config.data().eval_batch_size(), world, eval_ws.get()));
    result.evals.push_back(EvalPoint{state.next_step, e.loss, e.accuracy, 0, e.bits_per_byte});
  }
  result.steps = state.next_step;
  result.samples_per_second =
      result.train_seconds > 0 ? static_cast<double>(result.steps - start_step) * global_batch / result.train_seconds
                               : 0;
  result.params = std::move(state.params);
  return result;
}

}  // namespace shardline
