// The gradient and parameter traffic of a step, bucket by bucket
// (docs/collectives.md, "Buckets" and "Overlap"):
//
//   backward finishes a layer        -> GradientsReady: a bucket whose layers
//                                       are all done starts its reduce-scatter
//   after backward                   -> FinishReduce: every bucket reduced
//   the update of a bucket's pieces  -> Gather: its all-gather starts
//   the next forward reads a layer   -> AwaitParams: that layer's buckets
//                                       gathered
//   before anything else reads the   -> FinishGathers
//   parameters or talks to the world
//
// With overlap (an OverlapCollectives), the collectives run in the
// background while the step computes, and each call waits only for what it
// needs. Without, GradientsReady and AwaitParams do nothing, FinishReduce
// reduces every bucket in turn and Gather gathers at once: the same ops in
// the same order on the same bytes, so the two modes give the same bits.
//
// At ZeRO stage 3 (collective.zero_stage, docs/collectives.md "Stage 3")
// the parameters are whole only while a pass over the layers needs them:
//
//   the forward or backward reads a  -> AwaitParams / AwaitParamsForBackward:
//   layer                               its buckets gathered (the next ones
//                                       started, with overlap), those left
//                                       behind given back to the kernel
//   a bucket's reduce-scatter is done-> its gradients kept for this rank's
//                                       piece only
//   the update of a bucket's pieces  -> Gather: nothing sent; the bucket
//                                       stays sharded until the next forward
//   an evaluation's forward reads a  -> AwaitParams as in training's
//   layer, and ends                     forward, then EndForward: all given
//                                       back (evaluator.h)
//
// The gathers and reduce-scatters are the same ops on the same bytes as at
// stage 2, in another order: the same bits.
//
// Non-finite values are noted where a rank first sees them (nonfinite.h):
// its own gradients as each bucket is about to be reduced, what a reduce or
// a gather brought from a peer as that op is waited for.
#ifndef SHARDLINE_WORKER_TRAIN_EXCHANGE_H_
#define SHARDLINE_WORKER_TRAIN_EXCHANGE_H_

#include <array>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/job/shard.h"
#include "common/platform/page_memory.h"
#include "common/platform/page_pool.h"
#include "worker/collective/collectives.h"
#include "worker/collective/overlap.h"
#include "worker/train/nonfinite.h"
#include "worker/train/stage3_schedule.h"
#include "common/platform/env.h"

namespace shardline {

struct ExchangeOptions {
  Env* env = nullptr;                 // required: the clock of the waits it measures
  int zero_stage = 2;                 // 2 or 3 (collective.zero_stage)
  bool reshard_after_forward = true;  // stage 3 (collective.reshard_after_forward)
  int prefetch_buckets = 1;           // stage 3 with overlap (collective.prefetch_buckets)
};

class GradientExchange {
 public:
  // `buckets` tile the flat buffers in ascending order. `overlap` (may be
  // null: no overlap) wraps `comm`; both outlive this object, and so do the
  // buffers given to its calls until FinishReduce / FinishGathers return.
  GradientExchange(std::vector<Range> buckets, Collectives& comm, OverlapCollectives* overlap,
                   const ExchangeOptions& options = {});

  const std::vector<Range>& buckets() const { return buckets_; }
  bool overlapped() const { return overlap_ != nullptr; }
  // Stage 3: parameters are sharded between passes.
  bool sharded_params() const { return options_.zero_stage == 3; }

  // Stage 3: the parameters the passes read and gather into, whole when
  // this is called (after a restore or an init); every bucket is given back
  // but for this rank's pieces. Outlives this object's use of it.
  void BindParams(PagedFloats* params);

  // Starts step `step`: every bucket still to be reduced. At stage 3,
  // `grads` (the buffer GradientsReady and FinishReduce will be given)
  // lets the backward write each bucket's gradients into reused pages.
  void BeginStep(int64_t step, PagedFloats* grads = nullptr);
  // Stage 3: the backward is about to write the gradients of `part` (whole
  // tensors; LayerHooks::before_gradient): the pool's pages are mapped
  // under the buckets it lies in, once a step, so a bucket's gradients are
  // charged from their first write to the end of their reduce-scatter
  // only. No-op at stage 2.
  void BeforeGradients(Range part);
  // Backward has finished `layer` (a range of whole tensors) of `grads`:
  // with overlap, each bucket now complete starts its reduce-scatter.
  // At stage 3 a complete bucket's parameters are given back but for this
  // rank's piece (the backward reads them no more: LayerHooks), and a
  // reduce-scatter
  // started here is waited for (and its bucket's gradients given back but
  // for this rank's piece) once more than 1 + prefetch_buckets are under
  // way; without overlap it runs here, at once.
  absl::Status GradientsReady(Range layer, PagedFloats* grads, NonFiniteObservation* seen, int rank, int64_t step);
  // Every bucket of `grads` reduce-scattered (those not yet started are
  // started now, last first) and waited for. At stage 3 every bucket's
  // gradients are then kept for this rank's piece only, and its
  // parameters too.
  absl::Status FinishReduce(PagedFloats* grads, NonFiniteObservation* seen, int rank, int64_t step);

  // The update of bucket k's pieces of `params` is done: gather the bucket
  // (stage 3: nothing to send; the bucket stays sharded).
  absl::Status Gather(size_t k, PagedFloats* params, NonFiniteObservation* seen, int64_t step);
  // Before the forward reads `layer` of the parameters: the gathers of its
  // buckets are done (stage 3: started if they were not, the next
  // prefetch_buckets started, and with reshard_after_forward the buckets
  // the forward has left given back).
  absl::Status AwaitParams(Range layer, NonFiniteObservation* seen);
  // The same before the backward reads `layer` (stage 3 only: at stage 2
  // the forward left every parameter whole).
  absl::Status AwaitParamsForBackward(Range layer, NonFiniteObservation* seen);
  // Every gather started is done. At stage 2 the parameters are then whole;
  // at stage 3, sharded.
  absl::Status FinishGathers(NonFiniteObservation* seen);
  // Stage 3: a forward that no backward follows (an evaluation's) is over:
  // every bucket given back but for this rank's pieces, and the next
  // announcement starts a new pass. No-op at stage 2.
  absl::Status EndForward(NonFiniteObservation* seen);
  // Stage 3: the most floats of the parameters whole beyond this rank's
  // pieces at once since the last call.
  int64_t TakePeakWholeFloats();
  // Gathers started and not yet waited for (AwaitParams, FinishGathers).
  size_t gathers_pending() const { return gathers_.size(); }

  // Seconds the caller's thread has waited in FinishReduce, and in
  // AwaitParams / FinishGathers, so far; with overlap, seconds the
  // background thread spent running collectives so far.
  double reduce_wait_seconds() const { return reduce_wait_seconds_; }
  double gather_wait_seconds() const { return gather_wait_seconds_; }
  double comm_busy_seconds() const { return overlap_ != nullptr ? overlap_->busy_seconds() : 0; }

 private:
  struct Pending {
    size_t bucket;
    Ticket ticket;
    int64_t step;  // of the gather
  };
  // Stage 3: where each bucket's parameters are.
  enum class Residency { kSharded, kGathering, kWhole };
  // Bucket k of grads, noting first whether this rank's own gradients in it
  // are finite.
  absl::Span<float> CheckedBucket(size_t k, PagedFloats* grads, NonFiniteObservation* seen, int rank,
                                  int64_t step) const;
  void StartReduce(size_t k, PagedFloats* grads, NonFiniteObservation* seen, int rank, int64_t step);
  // Bucket k reduce-scattered on this thread, now (no overlap).
  absl::Status ReduceNow(size_t k, PagedFloats* grads, NonFiniteObservation* seen, int rank, int64_t step);
  // Waits for bucket k's reduce-scatter, if started and not yet waited for.
  absl::Status WaitReduce(size_t k, NonFiniteObservation* seen, int64_t step);
  absl::Status WaitGather(const Pending& p, NonFiniteObservation* seen);
  // Stage 3. The buckets [lo, hi] that `layer` lies in.
  std::pair<size_t, size_t> BucketsOf(Range layer) const;
  absl::Status NeedParams(Range layer, bool forward, NonFiniteObservation* seen);
  void StartParamGather(size_t k);
  absl::Status WaitParamGather(size_t k, NonFiniteObservation* seen);
  // Gives back bucket k of `v` but for this rank's piece.
  void KeepOwnPiece(size_t k, PagedFloats* v) const;
  // Stage 3: the pool's pages mapped over bucket k of `v` outside this
  // rank's piece, before a gather or the backward writes there (without a
  // pool, or if the kernel refuses, fresh pages fault in); and given back.
  void TakePages(size_t k, PagedFloats* v, std::array<PagePool::Handle, 2>* pages);
  void GivePages(size_t k, std::array<PagePool::Handle, 2>* pages);
  // Bucket k of `grads` given back but for this rank's piece.
  void ReleaseGrads(size_t k, PagedFloats* grads);
  absl::Status ReleaseParams(size_t k, NonFiniteObservation* seen);
  void CountWhole();

  const std::vector<Range> buckets_;
  Collectives& comm_;
  OverlapCollectives* const overlap_;
  const ExchangeOptions options_;
  std::vector<Range> own_;  // per bucket: this rank's piece (may be empty)
  // Stage 3.
  PagedFloats* params_ = nullptr;
  std::vector<Residency> residency_;
  std::vector<Ticket> gathering_;   // per bucket: its gather while kGathering
  // Pages reused from gather to gather (page_pool.h; null: the kernel gave
  // none, and gathers fault fresh pages in) and, per bucket, the pool
  // ranges over its parameters before and after this rank's piece.
  std::unique_ptr<PagePool> pool_;
  std::vector<std::array<PagePool::Handle, 2>> param_pages_;
  // The same for the gradients, taken before the first of the bucket's
  // gradients is written in the step (BeforeGradients; grad_taken_) and
  // given back after its reduce-scatter.
  PagedFloats* grads_ = nullptr;
  std::vector<std::array<PagePool::Handle, 2>> grad_pages_;
  std::vector<bool> grad_taken_;
  bool pool_warned_ = false;  // a refusal of the kernel is logged once
  std::vector<size_t> reduce_order_;  // buckets whose reduce-scatter is under way, oldest first
  int64_t step_ = 0;
  // Stage 3's decisions (stage3_schedule.h): which pass announced last and
  // how far it has come, and which buckets the backward has finished.
  const ScheduleOptions schedule_;
  PassCursor cursor_;
  BucketCompletion completion_;
  int64_t whole_floats_ = 0;
  int64_t peak_whole_floats_ = 0;
  std::vector<Ticket> reducing_;     // per bucket: its reduce-scatter; 0 not started, -1 waited for
  std::vector<Pending> gathers_;     // started, not yet waited for; ascending buckets
  double reduce_wait_seconds_ = 0;
  double gather_wait_seconds_ = 0;
};

}  // namespace shardline

#endif  // SHARDLINE_WORKER_TRAIN_EXCHANGE_H_
