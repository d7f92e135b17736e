// The train loop: small components called in plain order. The same loop
// runs a world of one (`shardline train`, LocalCollectives: no network) and,
// given other Collectives, one rank of a distributed job.
//
//   for each step:
//     TrainStep (gradients -> reduce-scatter -> clip -> shard update -> all-gather)
//     NanGuard, progress line, train metrics every log_every
//     Evaluate every eval_every and at the end
//
//   TrainOptions opts;
//   opts.metrics = writer.get();
//   ASSIGN_OR_RETURN(TrainResult r, RunTraining(cfg, data, comm, opts));
#ifndef SHARDLINE_WORKER_TRAIN_TRAIN_LOOP_H_
#define SHARDLINE_WORKER_TRAIN_TRAIN_LOOP_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/platform/env.h"
#include "common/observability/metrics_writer.h"
#include "proto/config.pb.h"
#include "worker/collective/collectives.h"
#include "worker/collective/island_rings.h"
#include "worker/data/dataset.h"
#include "worker/checkpoint/memory_snapshots.h"
#include "worker/checkpoint/save_restore.h"
#include "worker/train/numerics.h"
#include "worker/train/outer_steps.h"
#include "worker/train/run_sizes.h"
#include "worker/train/train_step.h"

namespace shardline {

// What a run is, told to a StepObserver before its first step.
struct RunInfo {
  int rank = 0;
  int world_size = 1;
  int64_t total_steps = 0;
  int64_t parameters = 0;          // all of them (each rank keeps a full working copy)
  int64_t owned_parameters = 0;    // this rank's shard
  int64_t optimizer_state_floats = 0;  // this rank's shard of optimizer state
  int64_t flops_per_example = 0;   // Mlp::TrainFlopsPerExample
  int global_batch_size = 0;
  bool bf16 = false;               // the matrix products in bfloat16 (train.precision BF16)
};

// Time a run spends outside its steps' own work, by cause (goodput
// accounting: docs/operations.md, "Goodput").
enum class Overhead {
  kRestore,          // restoring the checkpoint to resume from
  kEvaluation,       // evaluating on the test split
  kCheckpointStall,  // blocked on a save (waiting for the previous one, or the snapshot)
  kMemorySnapshot,   // taking and replicating an in-memory snapshot
};
const char* OverheadName(Overhead kind);  // "restore", "evaluation", "checkpoint_stall", "memory_snapshot"

// Told about a run's start, every completed step, and time lost, in order,
// on the training thread.
class StepObserver {
 public:
  virtual ~StepObserver() = default;
  virtual void OnStart(const RunInfo& info) = 0;
  virtual void OnStep(const StepResult& result, double step_seconds) = 0;
  virtual void OnOverhead(Overhead kind, double seconds) = 0;
  // The phases of a step listed in train.trace_steps (`step` completed
  // steps, i.e. 1-based), right after its OnStep.
  virtual void OnTrace(int64_t step, const std::vector<PhaseSpan>& spans) = 0;
  // Islands: each outer step, just before the OnStep of the step it follows.
  virtual void OnOuterStep(const OuterStepReport&) {}
};

// Everything optional a run reads or updates while it trains. Plain data:
// the loop reads and writes these in order, at step boundaries.
struct TrainOptions {
  // Receives train and eval lines (metrics.jsonl format); null: none.
  // Only rank 0 writes.
  MetricsSink* metrics = nullptr;
  // Draw the progress line and log eval results (rank 0 only).
  bool show_progress = true;
  // A stop request (total steps to complete) from outside, e.g. the
  // coordinator; read once per step and agreed across ranks in the step's
  // scalar all-reduce. Null or kNoStep: none.
  const std::atomic<int64_t>* stop_request = nullptr;
  // A checkpoint request (save after this many completed steps) from the
  // coordinator (checkpoint.every_seconds); agreed like stop_request. A
  // world of one with no requester applies every_seconds by its own clock.
  const std::atomic<int64_t>* checkpoint_request = nullptr;
  // An evaluation request (evaluate after this many completed steps), agreed
  // the same way.
  const std::atomic<int64_t>* eval_request = nullptr;
  // Set to the number of completed steps after every step.
  std::atomic<int64_t>* steps_done = nullptr;
  // Receives every step's result (Prometheus metrics); null: none.
  StepObserver* observer = nullptr;

  // Checkpoints. With a root, each rank saves its shard to
  // root/step_<s>/ every checkpoint.every_steps steps and (save_final) at the
  // last step, and tells `checkpoint_sink`, which commits.
  std::string checkpoint_root;
  CheckpointSink* checkpoint_sink = nullptr;
  // Told this process's numerics fingerprint (numerics.h) once the job is
  // known to fit, before any state is restored or trained: a distributed
  // worker sends it to the coordinator, which judges it before any shard
  // this process saves. Empty: not computed.
  std::function<void(const NumericsFingerprint&)> on_numerics;
  // Where the fingerprint of an earlier generation of this process is
  // kept (numerics.h); null: computed every time.
  NumericsMemo* numerics_memo = nullptr;
  std::string job_id;
  // A committed checkpoint directory to restore before the first step
  // (empty: start from scratch).
  std::string restore_dir;
  // In-memory snapshots (checkpoint.memory_every_steps): taken into here
  // in a world of more than one; null: none. Outlives the run (the worker
  // keeps it across generations).
  MemorySnapshots* memory = nullptr;
  // > 0: restore this step from `memory` instead of restore_dir - this
  // rank's range, from the held shards of the snapshot that overlap it
  // (in the same world, its own shard), then the others' parameters by
  // all-gather.
  int64_t memory_restore_step = 0;
  // The world the snapshot was taken in; 0: this one.
  int memory_restore_world = 0;
  // Required: the run's files (checkpoints, snapshots) and clock.
  Env* env = nullptr;
  // With outer steps (IslandShape::outer_steps, common/job/islands.h): the
  // generation's island rings, which outlive the run; `comm` is then
  // rings->island. Null: no outer steps (RunTraining refuses a config that
  // takes them without rings, and rings for one that does not).
  const IslandRings* island_rings = nullptr;
  // Copy the final parameters into TrainResult::params (ZeRO stage 2 only:
  // a stage-3 rank holds its pieces). Costs 4 bytes a parameter at the run's
  // end, so only for callers that read them in process (tests, references);
  // the worker and `shardline train` export from the checkpoints.
  bool keep_params = false;
};

struct EvalPoint {
  int64_t step = 0;  // steps completed
  double loss = 0;
  double accuracy = 0;
  double train_seconds = 0;  // training time up to this point, evaluation excluded
  double bits_per_byte = 0;  // text models; 0 otherwise
  bool text = false;         // on the validation text (next-byte accuracy), not a test split
  bool tokens = false;       // ... of token shards (next-token accuracy)
};

// The final evaluation as a run's last line says it: "final test accuracy
// 0.8979" for an image model, "final validation next-byte accuracy 0.4512,
// 1.883 bits per byte" for a text one ("next-token" over token shards).
std::string DescribeFinalEval(const EvalPoint& e);

struct TrainResult {
  int64_t steps = 0;
  double train_seconds = 0;       // wall time in steps, evaluation excluded
  double samples_per_second = 0;  // global examples per training second
  int64_t flops_per_example = 0;  // TrainFlopsPerExample of the model
  std::vector<EvalPoint> evals;   // in order; the last is at the final step
  std::vector<float> params;      // final parameters with TrainOptions::keep_params (never at stage 3)
  std::vector<double> losses;     // training loss of every step
  int64_t audits = 0;             // steps audited and passed (audit.h)
  bool stopped_early = false;     // ended at an agreed stop request
  int64_t start_step = 0;         // 0, or the restored checkpoint's step
  double checkpoint_seconds = 0;  // training time lost to saves (snapshot + waiting for the previous)
  int64_t memory_snapshots = 0;    // in-memory snapshots taken (and replicated)
  double memory_snapshot_seconds = 0;  // training time they took
  PhaseTimes phase_seconds;       // summed over this run's steps (steps - start_step of them)
  MemoryHeld memory;              // of the last step
  int64_t peak_rss_bytes = 0;     // the process's largest resident set, at the end
  int64_t predicted_bytes = 0;    // the memory plan's total (memory_plan.h)
  int64_t outer_steps = 0;        // islands: outer steps taken in this run
  int64_t outer_bytes_sent = 0;   // by this rank across islands
  double outer_seconds = 0;       // spent in outer steps (waiting on the exchange included)
};

// "held after the last step: <DescribeMemory>; memory predicted 402.3 MiB,
// peak 412.0 MiB (RSS)": the memory part of a run's final log line.
std::string DescribeHeld(const TrainResult& result);

// Trains per `config` (already validated) on `data`: from
// `options.restore_dir` if set, else from checkpoint.init_from or scratch,
// to the config's last step or an agreed stop. Errors: DATA_LOSS when the
// checkpoint to restore fails verification; FAILED_PRECONDITION when the
// loss stops being finite (NanGuard); what a collective returns when the
// world breaks (UNAVAILABLE, DEADLINE_EXCEEDED, ABORTED).
absl::StatusOr<TrainResult> RunTraining(const config::JobConfig& config, const TrainingData& data,
                                        Collectives& comm, const TrainOptions& options);

}  // namespace shardline

#endif  // SHARDLINE_WORKER_TRAIN_TRAIN_LOOP_H_
