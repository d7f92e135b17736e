#include "worker/train/exchange.h"

#include <algorithm>
#include <utility>

#include "common/faults/fault_injection.h"
#include "common/job/finite.h"
#include "common/platform/clock.h"
#include "common/platform/logging.h"

namespace shardline {
namespace {

absl::Span<float> BucketOf(PagedFloats* v, const Range& bucket) {
  return absl::MakeSpan(v->data() + bucket.begin, static_cast<size_t>(bucket.size()));
}

double SecondsSince(const Stopwatch& t) { return t.ElapsedSeconds(); }

}  // namespace

GradientExchange::GradientExchange(std::vector<Range> buckets, Collectives& comm, OverlapCollectives* overlap,
                                   const ExchangeOptions& options)
    : buckets_(std::move(buckets)),
      comm_(comm),
      overlap_(overlap),
      options_(options),
      schedule_{overlap != nullptr, options.prefetch_buckets, options.reshard_after_forward},
      completion_(buckets_) {
  SCHECK(options_.env != nullptr) << "ExchangeOptions.env is required";
  for (const Range& b : buckets_) own_.push_back(OwnedPiece(b, comm_.rank(), comm_.world_size()));
  residency_.assign(buckets_.size(), Residency::kWhole);
  gathering_.assign(buckets_.size(), 0);
  param_pages_.assign(buckets_.size(), {PagePool::kNone, PagePool::kNone});
  grad_pages_ = param_pages_;
  grad_taken_.assign(buckets_.size(), false);
  if (sharded_params()) {
    int64_t largest = 0;
    for (const Range& b : buckets_) largest = std::max(largest, b.size());
    absl::StatusOr<std::unique_ptr<PagePool>> pool = PagePool::Create(static_cast<size_t>(largest) * sizeof(float));
    if (pool.ok()) {
      pool_ = *std::move(pool);
    } else {
      SLOG(WARNING) << "ZeRO stage 3 gathers into fresh pages: " << pool.status();
    }
  }
}

void GradientExchange::BindParams(PagedFloats* params) {
  params_ = params;
  if (!sharded_params()) return;
  for (size_t k = 0; k < buckets_.size(); ++k) {
    KeepOwnPiece(k, params_);
    residency_[k] = Residency::kSharded;
  }
  CountWhole();
}

void GradientExchange::BeginStep(int64_t step, PagedFloats* grads) {
  step_ = step;
  grads_ = grads;
  cursor_.EndPass();
  completion_.Reset();
  reducing_.assign(buckets_.size(), 0);
  reduce_order_.clear();
}

absl::Span<float> GradientExchange::CheckedBucket(size_t k, PagedFloats* grads, NonFiniteObservation* seen,
                                                  int rank, int64_t step) const {
  const absl::Span<float> bucket = BucketOf(grads, buckets_[k]);
  if (!AllFinite(absl::Span<const float>(bucket))) seen->Note(NonFiniteSource::kOwnGradients, rank, step);
  return bucket;
}

void GradientExchange::StartReduce(size_t k, PagedFloats* grads, NonFiniteObservation* seen, int rank,
                                   int64_t step) {
  reducing_[k] = overlap_->StartReduceScatter(CheckedBucket(k, grads, seen, rank, step));
  reduce_order_.push_back(k);
}

absl::Status GradientExchange::ReduceNow(size_t k, PagedFloats* grads, NonFiniteObservation* seen, int rank,
                                         int64_t step) {
  reducing_[k] = -1;
  const absl::Status status = comm_.ReduceScatter(CheckedBucket(k, grads, seen, rank, step));
  if (const int from = comm_.nonfinite_source(); status.ok() && from >= 0) {
    seen->Note(NonFiniteSource::kReducedFromPeer, from, step);
  }
  return status;
}

absl::Status GradientExchange::WaitReduce(size_t k, NonFiniteObservation* seen, int64_t step) {
  if (reducing_[k] <= 0) return absl::OkStatus();
  const OpResult r = overlap_->Wait(reducing_[k]);
  reducing_[k] = -1;  // waited for
  if (r.nonfinite_source >= 0) seen->Note(NonFiniteSource::kReducedFromPeer, r.nonfinite_source, step);
  return r.status;
}

void GradientExchange::BeforeGradients(Range part) {
  if (!sharded_params() || grads_ == nullptr) return;
  // The pool's pages discard what was under them: taken before any of the
  // bucket's gradients is written (a model writes only what it announced:
  // model_test_util.h's CheckLayerHooks), and kept until the reduce-scatter.
  const auto [lo, hi] = BucketsOf(part);
  for (size_t k = lo; k <= hi; ++k) {
    if (grad_taken_[k]) continue;
    TakePages(k, grads_, &grad_pages_[k]);
    grad_taken_[k] = true;
  }
}

absl::Status GradientExchange::GradientsReady(Range layer, PagedFloats* grads, NonFiniteObservation* seen, int rank,
                                              int64_t step) {
  const bool stage3 = sharded_params();
  if (overlap_ == nullptr && !stage3) return absl::OkStatus();
  absl::Status status;
  for (const size_t k : completion_.Finish(layer)) {
    // The backward reads the bucket's parameters no more (LayerHooks):
    // given back now rather than when the next layer is announced.
    if (stage3) {
      const absl::Status s = ReleaseParams(k, seen);
      if (status.ok()) status = s;
    }
    if (overlap_ != nullptr) {
      StartReduce(k, grads, seen, rank, step);
      continue;
    }
    // Stage 3 on the training thread: reduced now, kept for this rank's piece.
    const Stopwatch start(options_.env);
    const absl::Status s = ReduceNow(k, grads, seen, rank, step);
    ReleaseGrads(k, grads);
    reduce_wait_seconds_ += SecondsSince(start);
    if (!s.ok()) return s;
    if (!status.ok()) return status;
  }
  // Stage 3 with overlap: at most 1 + prefetch_buckets reduce-scatters under
  // way; the oldest beyond that are waited for and their gradients given back.
  while (stage3 && overlap_ != nullptr && reduce_order_.size() > ReducesInFlight(schedule_)) {
    const size_t k = reduce_order_.front();
    reduce_order_.erase(reduce_order_.begin());
    const Stopwatch start(options_.env);
    const absl::Status s = WaitReduce(k, seen, step);
    reduce_wait_seconds_ += SecondsSince(start);
    ReleaseGrads(k, grads);
    if (status.ok()) status = s;
  }
  return status;
}

absl::Status GradientExchange::FinishReduce(PagedFloats* grads, NonFiniteObservation* seen, int rank,
                                            int64_t step) {
  const Stopwatch start(options_.env);
  absl::Status status;
  if (overlap_ == nullptr) {
    // The last layers first: the order backward finishes them (at stage 3,
    // the buckets of a model that announced no layers; the others are done).
    for (size_t k = buckets_.size(); k-- > 0 && status.ok();) {
      if (reducing_[k] == 0) status = ReduceNow(k, grads, seen, rank, step);
    }
  } else {
    for (size_t k = buckets_.size(); k-- > 0;) {
      if (reducing_[k] == 0) StartReduce(k, grads, seen, rank, step);  // a model that announced no layers
    }
    // Every one waited for, even after a failure: the buffers are ours again.
    for (size_t k = buckets_.size(); k-- > 0;) {
      const absl::Status s = WaitReduce(k, seen, step);
      if (status.ok()) status = s;
    }
  }
  reduce_wait_seconds_ += SecondsSince(start);
  if (sharded_params()) {
    for (size_t k = 0; k < buckets_.size(); ++k) ReleaseGrads(k, grads);
    const absl::Status s = FinishGathers(seen);  // the parameters sharded again
    if (status.ok()) status = s;
    if (pool_ != nullptr) pool_->Trim();  // between steps a rank holds its pieces only
  }
  return status;
}

absl::Status GradientExchange::Gather(size_t k, PagedFloats* params, NonFiniteObservation* seen, int64_t step) {
  if (sharded_params()) {
    KeepOwnPiece(k, params);  // already so, after FinishReduce: kept sharded until the next forward
    return absl::OkStatus();
  }
  if (overlap_ != nullptr) {
    gathers_.push_back(Pending{k, overlap_->StartAllGather(BucketOf(params, buckets_[k])), step});
    return absl::OkStatus();
  }
  const Stopwatch start(options_.env);
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
  if (sharded_params()) return NeedParams(layer, /*forward=*/true, seen);
  if (gathers_.empty()) return absl::OkStatus();
  const Stopwatch start(options_.env);
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
  if (sharded_params()) {
    absl::Status status;
    for (size_t k = 0; k < buckets_.size(); ++k) {
      const absl::Status s = ReleaseParams(k, seen);
      if (status.ok()) status = s;
    }
    return status;
  }
  return AwaitParams(Range{0, INT64_MAX}, seen);
}

// Stage 3 ---------------------------------------------------------------

std::pair<size_t, size_t> GradientExchange::BucketsOf(Range layer) const {
  return shardline::BucketsOf(buckets_, layer);
}

void GradientExchange::KeepOwnPiece(size_t k, PagedFloats* v) const {
  const Range b = buckets_[k], own = own_[k];
  float* base = v->data();
  ReleasePages(base + b.begin, static_cast<size_t>(own.begin - b.begin) * sizeof(float));
  ReleasePages(base + own.end, static_cast<size_t>(b.end - own.end) * sizeof(float));
}

void GradientExchange::CountWhole() {
  int64_t whole = 0;
  for (size_t k = 0; k < buckets_.size(); ++k) {
    if (residency_[k] != Residency::kSharded) whole += buckets_[k].size() - own_[k].size();
  }
  whole_floats_ = whole;
  peak_whole_floats_ = std::max(peak_whole_floats_, whole);
}

int64_t GradientExchange::TakePeakWholeFloats() {
  const int64_t peak = peak_whole_floats_;
  peak_whole_floats_ = whole_floats_;
  return peak;
}

void GradientExchange::TakePages(size_t k, PagedFloats* v, std::array<PagePool::Handle, 2>* pages) {
  if (pool_ == nullptr) return;
  const Range b = buckets_[k], own = own_[k];
  const Range parts[2] = {{b.begin, own.begin}, {own.end, b.end}};
  for (size_t i = 0; i < 2; ++i) {
    absl::StatusOr<PagePool::Handle> h =
        pool_->Take(v->data() + parts[i].begin, static_cast<size_t>(parts[i].size()) * sizeof(float));
    if (!h.ok() && !pool_warned_) {
      SLOG(WARNING) << "bucket " << k << " is written into fresh pages (warned once): " << h.status();
      pool_warned_ = true;
    }
    (*pages)[i] = h.ok() ? *h : PagePool::kNone;
  }
}

void GradientExchange::GivePages(size_t k, std::array<PagePool::Handle, 2>* pages) {
  if (pool_ == nullptr) return;
  for (PagePool::Handle& h : *pages) {
    const absl::Status s = pool_->Give(h);
    if (!s.ok() && !pool_warned_) {
      SLOG(WARNING) << "bucket " << k << " (warned once): " << s;
      pool_warned_ = true;
    }
    h = PagePool::kNone;
  }
}

void GradientExchange::ReleaseGrads(size_t k, PagedFloats* grads) {
  if (grad_taken_[k]) {
    GivePages(k, &grad_pages_[k]);
    grad_taken_[k] = false;
  }
  KeepOwnPiece(k, grads);
}

void GradientExchange::StartParamGather(size_t k) {
  if (residency_[k] != Residency::kSharded || overlap_ == nullptr) return;
  TakePages(k, params_, &param_pages_[k]);
  gathering_[k] = overlap_->StartAllGather(BucketOf(params_, buckets_[k]));
  residency_[k] = Residency::kGathering;
  CountWhole();
}

absl::Status GradientExchange::WaitParamGather(size_t k, NonFiniteObservation* seen) {
  if (residency_[k] == Residency::kWhole) return absl::OkStatus();
  const Stopwatch start(options_.env);
  absl::Status status;
  if (residency_[k] == Residency::kGathering) {
    status = WaitGather(Pending{k, gathering_[k], step_}, seen);
  } else {  // sharded, without overlap: gathered now, on this thread
    TakePages(k, params_, &param_pages_[k]);
    status = comm_.AllGather(BucketOf(params_, buckets_[k]));
    if (const int from = comm_.nonfinite_source(); status.ok() && from >= 0) {
      seen->Note(NonFiniteSource::kGatheredFromPeer, from, step_);
    }
  }
  residency_[k] = Residency::kWhole;
  CountWhole();
  gather_wait_seconds_ += SecondsSince(start);
  return status;
}

absl::Status GradientExchange::ReleaseParams(size_t k, NonFiniteObservation* seen) {
  if (!sharded_params() || residency_[k] == Residency::kSharded) return absl::OkStatus();
  absl::Status status;
  if (residency_[k] == Residency::kGathering) status = WaitParamGather(k, seen);  // it writes the bucket
  GivePages(k, &param_pages_[k]);
  KeepOwnPiece(k, params_);
  residency_[k] = Residency::kSharded;
  CountWhole();
  return status;
}

absl::Status GradientExchange::NeedParams(Range layer, bool forward, NonFiniteObservation* seen) {
  const ParamWindow w = cursor_.Announce(BucketsOf(layer), layer.begin, forward, schedule_);
  const int64_t n = static_cast<int64_t>(buckets_.size());
  absl::Status status;
  // 1. What the pass has left behind goes back to the kernel.
  if (w.release_others) {
    for (int64_t k = 0; k < n; ++k) {
      if (w.Wanted(k)) continue;
      const absl::Status s = ReleaseParams(static_cast<size_t>(k), seen);
      if (status.ok()) status = s;
    }
  }
  // 2. The layer's buckets, whole; 3. the next ones started.
  if (!forward && w.in_order && w.past_first_layer) CrashPoint("backward_gather", step_);
  for (size_t k = w.lo; k <= w.hi; ++k) StartParamGather(k);
  for (size_t k = w.lo; k <= w.hi; ++k) {
    const absl::Status s = WaitParamGather(k, seen);
    if (status.ok()) status = s;
  }
  for (int64_t k = std::max<int64_t>(w.first, 0); k <= std::min(w.last, n - 1); ++k) {
    StartParamGather(static_cast<size_t>(k));
  }
  return status;
}

absl::Status GradientExchange::AwaitParamsForBackward(Range layer, NonFiniteObservation* seen) {
  if (!sharded_params()) return absl::OkStatus();
  return NeedParams(layer, /*forward=*/false, seen);
}

absl::Status GradientExchange::EndForward(NonFiniteObservation* seen) {
  if (!sharded_params()) return absl::OkStatus();
  const absl::Status status = FinishGathers(seen);
  cursor_.EndPass();
  return status;
}

}  // namespace shardline
