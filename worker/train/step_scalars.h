// The scalars every rank agrees on in a step's one scalar all-reduce, by
// name: the loss and squared gradient norm (summed), the stop, checkpoint
// and eval votes (the smallest wins), whether any rank saw a non-finite
// number (the largest), and the hash of the values every rank must hold
// alike (param_agreement.h: its halves' minimum and maximum, equal when
// every rank's hash is). Packed in a fixed order, the same on
// every rank; the order and the ops are part of the bits (a sum's order
// is the reduction's).
//
//   StepScalars mine{loss_sum, grad_sq, votes.stop, votes.checkpoint, votes.eval, seen};
//   std::array<double, StepScalars::kCount> packed = mine.Pack();
//   RETURN_IF_ERROR(comm.AllReduceScalars(absl::MakeSpan(packed), StepScalars::kOps));
//   const StepScalars agreed = StepScalars::Unpack(packed);
#ifndef SHARDLINE_WORKER_TRAIN_STEP_SCALARS_H_
#define SHARDLINE_WORKER_TRAIN_STEP_SCALARS_H_

#include <array>
#include <cstdint>

#include "worker/collective/collectives.h"

namespace shardline {

struct StepScalars {
  double loss_sum = 0;            // sum over the global batch (finite: a non-finite one is flagged instead)
  double grad_sq = 0;             // squared L2 norm of this rank's gradient pieces; 0 when not computed
  int64_t stop_vote = 0;          // steps to complete; kNoStep: none
  int64_t checkpoint_vote = 0;
  int64_t eval_vote = 0;
  bool nonfinite_seen = false;    // this rank noted a non-finite number
  uint64_t param_hash = 0;        // mine: what I hold; agreed: the smallest halves
  bool params_agree = true;       // agreed only: every rank's param_hash is the same

  static constexpr int kCount = 10;
  static constexpr ReduceOp kOps[kCount] = {ReduceOp::kSum, ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMin,
                                           ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kMin, ReduceOp::kMax,
                                           ReduceOp::kMin, ReduceOp::kMax};

  std::array<double, kCount> Pack() const;
  static StepScalars Unpack(const std::array<double, kCount>& reduced);
};

}  // namespace shardline

#endif  // SHARDLINE_WORKER_TRAIN_STEP_SCALARS_H_
