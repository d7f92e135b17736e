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
// Non-finite values are noted where a rank first sees them (nonfinite.h):
// its own gradients as each bucket is about to be reduced, what a reduce or
// a gather brought from a peer as that op is waited for.
#ifndef SHARDLINE_WORKER_TRAIN_EXCHANGE_H_
#define SHARDLINE_WORKER_TRAIN_EXCHANGE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "common/job/shard.h"
#include "worker/collective/collectives.h"
#include "worker/collective/overlap.h"
#include "worker/train/nonfinite.h"

namespace shardline {

class GradientExchange {
 public:
  // `buckets` tile the flat buffers in ascending order. `overlap` (may be
  // null: no overlap) wraps `comm`; both outlive this object, and so do the
  // buffers given to its calls until FinishReduce / FinishGathers return.
  GradientExchange(std::vector<Range> buckets, Collectives& comm, OverlapCollectives* overlap);

  const std::vector<Range>& buckets() const { return buckets_; }
  bool overlapped() const { return overlap_ != nullptr; }

  // Starts a step's reduction: every bucket still to be reduced.
  void BeginReduce();
  // Backward has finished `layer` (a range of whole tensors) of `grads`:
  // with overlap, each bucket now complete starts its reduce-scatter.
  void GradientsReady(Range layer, std::vector<float>* grads, NonFiniteObservation* seen, int rank, int64_t step);
  // Every bucket of `grads` reduce-scattered (those not yet started are
  // started now, last first) and waited for.
  absl::Status FinishReduce(std::vector<float>* grads, NonFiniteObservation* seen, int rank, int64_t step);

  // The update of bucket k's pieces of `params` is done: gather the bucket.
  absl::Status Gather(size_t k, std::vector<float>* params, NonFiniteObservation* seen, int64_t step);
  // Before reading `layer` of the parameters: the gathers of its buckets
  // are done.
  absl::Status AwaitParams(Range layer, NonFiniteObservation* seen);
  // Every gather done: the parameters are whole.
  absl::Status FinishGathers(NonFiniteObservation* seen);
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
  // Bucket k of grads, noting first whether this rank's own gradients in it
  // are finite.
  absl::Span<float> CheckedBucket(size_t k, std::vector<float>* grads, NonFiniteObservation* seen, int rank,
                                  int64_t step) const;
  void StartReduce(size_t k, std::vector<float>* grads, NonFiniteObservation* seen, int rank, int64_t step);
  absl::Status WaitGather(const Pending& p, NonFiniteObservation* seen);

  const std::vector<Range> buckets_;
  Collectives& comm_;
  OverlapCollectives* const overlap_;
  std::vector<int64_t> unfinished_;  // per bucket: gradient elements backward has not finished
  std::vector<Ticket> reducing_;     // per bucket: its reduce-scatter, 0 if not started
  std::vector<Pending> gathers_;     // started, not yet waited for; ascending buckets
  double reduce_wait_seconds_ = 0;
  double gather_wait_seconds_ = 0;
};

}  // namespace shardline

#endif  // SHARDLINE_WORKER_TRAIN_EXCHANGE_H_
