#include "worker/train/exchange.h"

#include <utility>

#include "common/job/finite.h"
#include "common/platform/clock.h"

namespace shardline {
namespace {

absl::Span<float> BucketOf(std::vector<float>* v, const Range& bucket) {
  return absl::MakeSpan(v->data() + bucket.begin, static_cast<size_t>(bucket.size()));
}

double SecondsSince(const Stopwatch& t) { return t.ElapsedSeconds(); }

}  // namespace

GradientExchange::GradientExchange(std::vector<Range> buckets, Collectives& comm, OverlapCollectives* overlap)
    : buckets_(std::move(buckets)), comm_(comm), overlap_(overlap) {}

void GradientExchange::BeginReduce() {
  unfinished_.clear();
  for (const Range& b : buckets_) unfinished_.push_back(b.size());
  reducing_.assign(buckets_.size(), 0);
}

absl::Span<float> GradientExchange::CheckedBucket(size_t k, std::vector<float>* grads, NonFiniteObservation* seen,
                                                  int rank, int64_t step) const {
  const absl::Span<float> bucket = BucketOf(grads, buckets_[k]);
  if (!AllFinite(absl::Span<const float>(bucket))) seen->Note(NonFiniteSource::kOwnGradients, rank, step);
  return bucket;
}

void GradientExchange::StartReduce(size_t k, std::vector<float>* grads, NonFiniteObservation* seen, int rank,
                                   int64_t step) {
  reducing_[k] = overlap_->StartReduceScatter(CheckedBucket(k, grads, seen, rank, step));
}

void GradientExchange::GradientsReady(Range layer, std::vector<float>* grads, NonFiniteObservation* seen, int rank,
                                      int64_t step) {
  if (overlap_ == nullptr) return;
  for (size_t k = buckets_.size(); k-- > 0;) {
    const Range both = Overlap(buckets_[k], layer);
    if (both.empty() || reducing_[k] != 0) continue;
    unfinished_[k] -= both.size();
    if (unfinished_[k] == 0) StartReduce(k, grads, seen, rank, step);
  }
}

absl::Status GradientExchange::FinishReduce(std::vector<float>* grads, NonFiniteObservation* seen, int rank,
                                            int64_t step) {
  const Stopwatch start;
  absl::Status status;
  if (overlap_ == nullptr) {
    // The last layers first: the order backward finishes them.
    for (size_t k = buckets_.size(); k-- > 0;) {
      status = comm_.ReduceScatter(CheckedBucket(k, grads, seen, rank, step));
      if (!status.ok()) break;
      if (const int from = comm_.nonfinite_source(); from >= 0) seen->Note(NonFiniteSource::kReducedFromPeer, from, step);
    }
  } else {
    for (size_t k = buckets_.size(); k-- > 0;) {
      if (reducing_[k] == 0) StartReduce(k, grads, seen, rank, step);  // a model that announced no layers
    }
    // Every one waited for, even after a failure: the buffers are ours again.
    for (size_t k = buckets_.size(); k-- > 0;) {
      const OpResult r = overlap_->Wait(reducing_[k]);
      if (status.ok()) status = r.status;
      if (r.nonfinite_source >= 0) seen->Note(NonFiniteSource::kReducedFromPeer, r.nonfinite_source, step);
    }
  }
  reduce_wait_seconds_ += SecondsSince(start);
  return status;
}

absl::Status GradientExchange::Gather(size_t k, std::vector<float>* params, NonFiniteObservation* seen, int64_t step) {
  if (overlap_ != nullptr) {
    gathers_.push_back(Pending{k, overlap_->StartAllGather(BucketOf(params, buckets_[k])), step});
    return absl::OkStatus();
  }
  const Stopwatch start;
  absl::Status status = comm_.AllGather(BucketOf(params, buckets_[k]));
  if (status.ok()) {
    if (const int from = comm_.nonfinite_source(); from >= 0) seen->Note(NonFiniteSource::kGatheredFromPeer, from, step);
  }
  gather_wait_seconds_ += SecondsSince(start);
  return status;
}

absl::Status GradientExchange::WaitGather(const Pending& p, NonFiniteObservation* seen) {
  const OpResult r = overlap_->Wait(p.ticket);
  if (r.nonfinite_source >= 0) seen->Note(NonFiniteSource::kGatheredFromPeer, r.nonfinite_source, p.step);
  return r.status;
}

absl::Status GradientExchange::AwaitParams(Range layer, NonFiniteObservation* seen) {
  if (gathers_.empty()) return absl::OkStatus();
  const Stopwatch start;
  absl::Status status;
  // Gathers were started in ascending bucket order: the ones this layer
  // needs, and any before them, are at the front.
  size_t done = 0;
  while (done < gathers_.size() && buckets_[gathers_[done].bucket].begin < layer.end) {
    const absl::Status s = WaitGather(gathers_[done], seen);
    if (status.ok()) status = s;
    ++done;
  }
  gathers_.erase(gathers_.begin(), gathers_.begin() + static_cast<std::ptrdiff_t>(done));
  gather_wait_seconds_ += SecondsSince(start);
  return status;
}

absl::Status GradientExchange::FinishGathers(NonFiniteObservation* seen) {
  return AwaitParams(Range{0, INT64_MAX}, seen);
}

}  // namespace shardline
