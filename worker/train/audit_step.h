// The replay audit inside a train step: what audit.h decides, computed.
//
//   ASSIGN_OR_RETURN(AuditWork audit, StartAudit(ctx, step, state, b));  // before the step's own work
//   ... the step's backward adds its first micro-batch to audit.own ...
//   RETURN_IF_ERROR(SettleAudit(ctx, params, step, audit, b));  // after its scalars
#ifndef SHARDLINE_WORKER_TRAIN_AUDIT_STEP_H_
#define SHARDLINE_WORKER_TRAIN_AUDIT_STEP_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/job/float_hash.h"
#include "worker/train/train_step.h"

namespace shardline {

struct AuditWork {
  bool due = false;
  double gather_seconds = 0;  // waiting for the last step's gathers first
  int target = -1;        // the ring rank whose first micro-batch this rank recomputed
  uint64_t audited = 0;   // the hash of that recomputation
  FloatHasher own;        // this rank's own first micro-batch, part by part (the step's backward adds)
  double seconds = 0;     // the recomputation's wall time
};

// Recomputes `target`'s (a ring rank) first micro-batch of `step` from the
// parameters as they stand, into b->grads as scratch (the step's first
// micro-batch overwrites it), and returns the hash of its gradient part by
// part as Backward finishes them (LayerHooks::after_backward order): what
// `target` hashes of its own. Requires whole parameters (stage 2) with no
// gather pending.
absl::StatusOr<uint64_t> RecomputeFirstMicroBatch(const StepContext& ctx, const float* params, int64_t step,
                                                  int target, StepBuffers* b);

// Whether `step` is audited and, if so, its recomputation done: every
// pending gather waited for first (the parameters whole).
// The wait is the span "all_gather" of `timer`, the whole "audit".
absl::StatusOr<AuditWork> StartAudit(const StepContext& ctx, int64_t step, TrainState* state, StepBuffers* b,
                                     PhaseTimer& timer);

// After the step's scalars: every rank's hashes exchanged and, on a
// mismatch, arbitrated (audit.h; the arbiter's or the replay's
// recomputations use b->grads, the step then failing). OK: the audit
// passed or the step is not audited.
absl::Status SettleAudit(const StepContext& ctx, const float* params, int64_t step, const AuditWork& work,
                         StepBuffers* b);

}  // namespace shardline

#endif  // SHARDLINE_WORKER_TRAIN_AUDIT_STEP_H_
