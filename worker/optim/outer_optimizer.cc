#include "worker/optim/outer_optimizer.h"

#include "common/checkpoint/buffer_names.h"
#include "common/job/float_hash.h"
#include "common/platform/logging.h"

namespace shardline {

OuterOptimizer::OuterOptimizer(std::unique_ptr<Optimizer> inner, const FlatLayout& layout,
                               const config::DilocoConfig& config)
    : Optimizer(layout, inner->pieces()), inner_(std::move(inner)), config_(config) {
  outer_params_.name = kOuterParamsBuffer;
  momentum_.name = kOuterMomentumBuffer;
  outer_params_.values.assign(static_cast<size_t>(size_), 0.0f);
  momentum_.values.assign(static_cast<size_t>(size_), 0.0f);
}

std::vector<StateBuffer*> OuterOptimizer::state() {
  std::vector<StateBuffer*> all = inner_->state();
  all.push_back(&outer_params_);
  all.push_back(&momentum_);
  return all;
}

double OuterOptimizer::UpdateSegments(const UpdateStep& step, float* params, const float* grads, bool want_update_sq,
                                      size_t first, size_t last) {
  if (first >= last) return 0;
  // The inner optimizer has the same pieces, so the same segments: the
  // range from the first's start to the last's end selects exactly these.
  const Range within{segments_[first].flat, segments_[last - 1].flat + segments_[last - 1].size};
  return inner_->Update(step, params, grads, want_update_sq, within);
}

void OuterOptimizer::SetAnchor(const float* params) {
  for (const Segment& s : segments_) {
    float* anchor = outer_params_.values.data() + s.packed;
    for (int64_t i = 0; i < s.size; ++i) anchor[i] = params[s.flat + i];
  }
  std::fill(momentum_.values.begin(), momentum_.values.end(), 0.0f);
}

double OuterOptimizer::PseudoGradient(const float* params, absl::Span<float> delta) const {
  SCHECK(static_cast<int64_t>(delta.size()) == size_);
  double sq = 0;
  for (const Segment& s : segments_) {
    const float* anchor = outer_params_.values.data() + s.packed;
    float* d = delta.data() + s.packed;
    for (int64_t i = 0; i < s.size; ++i) {
      d[i] = anchor[i] - params[s.flat + i];
      sq += static_cast<double>(d[i]) * d[i];
    }
  }
  return sq;
}

double OuterOptimizer::OuterUpdate(absl::Span<const float> delta_sum, int islands, float* params) {
  SCHECK(static_cast<int64_t>(delta_sum.size()) == size_ && islands >= 1);
  const float inv = 1.0f / static_cast<float>(islands);
  const float lr = config_.outer_lr(), mu = config_.outer_momentum();
  double sq = 0;
  for (const Segment& s : segments_) {
    float* anchor = outer_params_.values.data() + s.packed;
    float* m = momentum_.values.data() + s.packed;
    const float* sum = delta_sum.data() + s.packed;
    for (int64_t i = 0; i < s.size; ++i) {
      const float d = sum[i] * inv;
      m[i] = mu * m[i] + d;
      anchor[i] -= lr * (d + mu * m[i]);
      params[s.flat + i] = anchor[i];
      sq += static_cast<double>(d) * d;
    }
  }
  return sq;
}

uint64_t OuterOptimizer::SharedStateHash() const {
  FloatHasher h;
  h.Add(outer_params_.values.data(), static_cast<int64_t>(outer_params_.values.size()));
  h.Add(momentum_.values.data(), static_cast<int64_t>(momentum_.values.size()));
  return h.Digest();
}

}  // namespace shardline
