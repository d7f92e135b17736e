// One optimizer step of data-parallel training with ZeRO-sharded optimizer
// state, written as the plain sequence it is:
//
//   gradients of this rank's slice (micro-batches summed)  -> ComputeGradients
//   reduce-scatter each gradient bucket, last first         -> exchange.FinishReduce
//   global gradient norm, loss (scalar all-reduce), clip
//   optimizer update of the owned pieces, bucket by bucket  -> optimizer.Update
//   all-gather each bucket of new parameters, first first   -> exchange.Gather
//
// With collective.overlap the collectives run in the background
// (exchange.h): each bucket's reduce-scatter starts as soon as backward has
// finished its layers, each all-gather as soon as its bucket is updated,
// and the next step's forward waits for each layer's parameters only when
// it reaches that layer. Anything else that reads the parameters or talks
// to the world between steps first calls exchange.FinishGathers.
//
// With LocalCollectives (a world of one) the two collectives are no-ops and
// the pieces are the whole buffer.
#ifndef SHARDLINE_WORKER_TRAIN_TRAIN_STEP_H_
#define SHARDLINE_WORKER_TRAIN_TRAIN_STEP_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/platform/page_memory.h"
#include "proto/config.pb.h"
#include "worker/checkpoint/save_restore.h"
#include "worker/collective/collectives.h"
#include "worker/data/dataset.h"
#include "worker/data/pipeline.h"
#include "worker/model/model.h"
#include "worker/model/products.h"
#include "worker/optim/lr_schedule.h"
#include "worker/optim/optimizer.h"
#include "worker/train/exchange.h"
#include "worker/train/nonfinite.h"
#include "worker/train/phase_timer.h"

namespace shardline {

// Everything a step reads but does not own. All references outlive the step.
struct StepContext {
  const config::JobConfig& config;
  const Model& model;
  const Dataset& train;
  BatchPipeline& pipeline;
  // The bucketed collectives (over the buckets of
  // worker/model/bucket_plan.h); the optimizer owns this rank's pieces of
  // those buckets (OwnedPieces).
  GradientExchange& exchange;
  Optimizer& optimizer;
  const LrSchedule& schedule;
  Collectives& comm;
  // A checkpoint may still be copying the shard: waited for before the
  // optimizer changes it. Null: no checkpoints.
  ShardSaver* saver = nullptr;
  // Required: the clock every phase is timed by.
  Env* env = nullptr;
  // Islands: the data slice is the world's (rank data_rank of data_world),
  // not the island ring's, and the step's loss and gradients are means
  // over the batch_examples its island reads. 0: comm's, and the global batch.
  int data_rank = 0;
  int data_world = 0;
  int64_t batch_examples = 0;
  // This process's numerics fingerprint (numerics.h); 0: unknown. Audits
  // compare only ranks with the same one.
  uint64_t numerics = 0;
};

// The examples a step's loss and gradients are means over: its island's
// batch (batch_examples), or the global batch.
inline int64_t StepExamples(const StepContext& ctx) {
  return ctx.batch_examples > 0 ? ctx.batch_examples : ctx.config.data().global_batch_size();
}
// What every target's gradient is scaled by, 1 / (StepExamples * targets
// per example): the same on every rank, and in an audit's recomputation.
inline float GradScale(const StepContext& ctx) {
  return 1.0f / static_cast<float>(StepExamples(ctx) * ctx.train.targets_per_example());
}
// The worker rank of each rank of ctx.comm's ring, in ring order (an
// island's ring starts at its first worker's rank).
std::vector<int> RingWorkerRanks(const StepContext& ctx);

// The state a step advances. params is the full working copy; only the
// optimizer's pieces of it are authoritative between all-gathers.
struct TrainState {
  int64_t next_step = 0;  // 0-based index of the next step to run
  // Laid out whole; at ZeRO stage 3 only this rank's pieces are held
  // between steps (the rest given back to the kernel: exchange.h).
  PagedFloats params;
  // The first non-finite number this rank has seen and the world has not
  // yet judged (nonfinite.h); never checkpointed. A step's own observations
  // are judged in that step; its update's and all-gather's in the next one,
  // or by SettleNonFinite before the parameters are used otherwise.
  NonFiniteObservation nonfinite;
};

// The first n examples of a gathered batch, as a model reads them.
inline Examples ExamplesOf(const BatchData& b, int n) {
  return Examples{n, b.x.empty() ? nullptr : b.x.data(), b.tokens.empty() ? nullptr : b.tokens.data(), b.y.data()};
}

// Per-step scratch, reused.
struct StepBuffers {
  PagedFloats grads;  // at stage 3, this rank's pieces only once reduced
  std::vector<int64_t> indices;
  BatchData batch;
  std::unique_ptr<ModelWorkspace> workspace;  // made by model.NewWorkspace() on first use
  // Set (non-null) for a step that is traced (train.trace_steps): the step
  // appends its phases to it.
  std::vector<PhaseSpan>* spans = nullptr;
};

// Seconds spent in each phase of one step, on the training thread. The four
// main phases are sequential and make up the step; the others are parts of
// them, but comm_busy. With overlap, reduce_scatter and all_gather are the
// time the step waited for them (after backward; in forward, for the last
// step's gathers), the rest of their time hidden behind compute.
struct PhaseTimes {
  double compute = 0;         // data + forward + backward
  double reduce_scatter = 0;
  double optimizer = 0;       // clip + wait_peers + snapshot wait + update
  double all_gather = 0;
  double data = 0;            // part of compute: gathering the batch
  double wait_peers = 0;      // part of optimizer: the scalar all-reduce
  double snapshot_wait = 0;   // part of optimizer: a checkpoint still copying the shard
  // With collective.overlap: seconds the collectives ran in the background
  // during the step, hidden behind the phases above or waited for in them
  // (reduce_scatter and all_gather are then the waits only).
  double comm_busy = 0;

  // The time this rank spends on its own work, not waiting on peers or
  // the network: what the straggler score compares.
  double busy() const { return compute + optimizer - wait_peers - snapshot_wait; }

  PhaseTimes& operator+=(const PhaseTimes& o) {
    compute += o.compute;
    reduce_scatter += o.reduce_scatter;
    optimizer += o.optimizer;
    all_gather += o.all_gather;
    data += o.data;
    wait_peers += o.wait_peers;
    snapshot_wait += o.snapshot_wait;
    comm_busy += o.comm_busy;
    return *this;
  }
};

// "compute 42.7 ms, reduce-scatter 4.4 ms, optimizer 2.2 ms, all-gather
// 4.4 ms": the mean per step of `total` over `steps` steps; with overlap
// also ", collectives 9.1 ms in the background (7.3 ms hidden)".
std::string PhasesPerStep(const PhaseTimes& total, int64_t steps);

// Bytes this rank held for a step, by what for (the memory gauges,
// docs/operations.md; the model in docs/collectives.md, "Stage 3").
struct MemoryHeld {
  int zero_stage = 2;
  int64_t parameters = 0;       // resident parameter bytes after the step
  int64_t parameters_peak = 0;  // the most during it: all (stage 2); own pieces + buckets gathered at once (3)
  int64_t gradients = 0;        // resident gradient bytes after the step
  int64_t optimizer = 0;        // optimizer state (AdamW moments): this rank's pieces
  int64_t activations = 0;      // the model's workspace: activations kept for backward, and scratch
  int64_t evaluation = 0;       // what evaluations added to the workspace (they run in the step's: 0 expected)
  int64_t evaluation_peak = 0;  // parameters held at an evaluation's peak (as parameters_peak), once one has run
  int64_t communication = 0;    // the most bytes the collectives held at once during the step (comm_memory.h)
  int64_t rounded_weights = 0;  // BF16: the weights' bfloat16 rounding the step's products read (products.h)
};

// "parameters 3.21 MiB (3.21 MiB at the step's peak, 3.21 MiB at an
// evaluation's), gradients 3.2 MiB, optimizer 6.4 MiB, activations 67.1
// MiB (evaluation +0.0 MiB), communication 2.0 MiB (ZeRO stage 2)", and
// in BF16 ", bfloat16 weights 1.6 MiB" before the stage.
std::string DescribeMemory(const MemoryHeld& m);

struct StepResult {
  int64_t step = 0;
  double loss = 0;         // mean over the global batch
  float lr = 0;
  double grad_norm = -1;   // global L2 norm before clipping; -1 if not computed
  double update_norm = -1; // global L2 norm of the parameter change; -1 if not computed
  double param_norm = -1;  // global L2 norm after the update; -1 if not computed
  // The smallest stop request of any rank (steps to complete), agreed by
  // every rank in this step's scalar all-reduce; kNoStep if none.
  int64_t agreed_stop = 0;
  // The same for checkpoint requests: the smallest requested save step of
  // any rank (kNoStep if none).
  int64_t agreed_checkpoint = 0;
  // And for evaluation requests.
  int64_t agreed_eval = 0;
  // Set when the world judged that a rank's own arithmetic went non-finite
  // (the run diverged): the step was not applied and loss is NaN.
  // Otherwise kClean.
  NonFiniteVerdict nonfinite;
  // The step was audited (worker/train/audit.h) and every hash matched.
  bool audited = false;
  PhaseTimes times;
  MemoryHeld memory;
};

// "None" for every step-valued request and decision (stop, checkpoint,
// eval): in votes, in StepResult::agreed_*, and on the wire (the
// coordinator's commands use 0 the same way). Step 0 is never a request:
// requests name a count of completed steps, and the first step completes 1.
inline constexpr int64_t kNoStep = 0;

// True when `agreed` names a step and `steps_done` has reached it.
inline bool Reached(int64_t agreed, int64_t steps_done) { return agreed != kNoStep && agreed <= steps_done; }


// The votes of this rank, each a step count or kNoStep; the minimum over
// the ranks' requests (kNoStep if no rank has one) of each comes back in
// StepResult::agreed_*.
struct Votes {
  int64_t stop = 0;
  int64_t checkpoint = 0;
  int64_t eval = 0;
};

// Runs step state->next_step and advances it. `with_norms` also computes
// grad/update/param norms (always computes the grad norm when clipping).
// `votes` are this rank's requested stop, checkpoint and eval steps; the
// minimum over ranks of each comes back in agreed_*, so all ranks act at the
// same step boundary without asking anyone.
//
// Non-finite numbers are judged by every rank together (nonfinite.h): when
// a rank's own loss, gradients or update went non-finite, the step returns
// with result.nonfinite set, loss NaN and the state unchanged (the caller
// stops: NanGuard::Diverged); when they came from a peer, it fails with a
// PeerFaultError naming the rank. Otherwise it fails only if a collective
// fails; the state is then unusable until restored.
absl::StatusOr<StepResult> TrainStep(const StepContext& ctx, bool with_norms, const Votes& votes,
                                     TrainState* state, StepBuffers* buffers);

}  // namespace shardline

#endif  // SHARDLINE_WORKER_TRAIN_TRAIN_STEP_H_
