#include "worker/optim/optimizer.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/checkpoint/buffer_names.h"

namespace shardline {
namespace {

// p -= lr * (v + wd * p) with v = momentum * v + g (PyTorch's SGD, decoupled
// decay); Nesterov uses g + momentum * v in place of v.
class Sgd : public Optimizer {
 public:
  Sgd(const config::SgdConfig& c, const FlatLayout& layout, std::vector<Range> pieces)
      : Optimizer(layout, std::move(pieces)), c_(c) {
    momentum_.name = kMomentumBuffer;
    momentum_.values.assign(static_cast<size_t>(size_), 0.0f);
  }

  double UpdateSegments(const UpdateStep& step, float* params, const float* grads, bool want_update_sq, size_t first,
                        size_t last) override {
    if (c_.nesterov()) {
      return want_update_sq ? Run<true, true>(step, params, grads, first, last)
                            : Run<true, false>(step, params, grads, first, last);
    }
    return want_update_sq ? Run<false, true>(step, params, grads, first, last)
                          : Run<false, false>(step, params, grads, first, last);
  }

 private:
  template <bool kNesterov, bool kUpdateSq>
  double Run(const UpdateStep& step, float* all_params, const float* all_grads, size_t first, size_t last) {
    const float lr = step.lr, grad_scale = step.grad_scale;
    const float mu = c_.momentum(), wd = c_.weight_decay();
    double update_sq = 0;
    for (size_t k = first; k < last; ++k) {
      const Segment& s = segments_[k];
      const float decay = s.decay ? wd : 0.0f;
      float* params = all_params + s.flat;
      const float* grads = all_grads + s.flat;
      float* v = momentum_.values.data() + s.packed;
      for (int64_t i = 0; i < s.size; ++i) {
        const float g = grads[i] * grad_scale;
        v[i] = mu * v[i] + g;
        const float dir = kNesterov ? g + mu * v[i] : v[i];
        const float delta = lr * (dir + decay * params[i]);
        params[i] -= delta;
        if (kUpdateSq) update_sq += static_cast<double>(delta) * delta;
      }
    }
    return update_sq;
  }

 public:
  std::vector<StateBuffer*> state() override { return {&momentum_}; }

 private:
  config::SgdConfig c_;
  StateBuffer momentum_;
};

// AdamW (Loshchilov & Hutter): bias-corrected Adam plus decoupled decay.
class AdamW : public Optimizer {
 public:
  AdamW(const config::AdamWConfig& c, const FlatLayout& layout, std::vector<Range> pieces)
      : Optimizer(layout, std::move(pieces)), c_(c) {
    m_.name = kAdamMBuffer;
    v_.name = kAdamVBuffer;
    m_.values.assign(static_cast<size_t>(size_), 0.0f);
    v_.values.assign(static_cast<size_t>(size_), 0.0f);
  }

  double UpdateSegments(const UpdateStep& step, float* params, const float* grads, bool want_update_sq, size_t first,
                        size_t last) override {
    return want_update_sq ? Run<true>(step, params, grads, first, last) : Run<false>(step, params, grads, first, last);
  }

 private:
  template <bool kUpdateSq>
  double Run(const UpdateStep& step, float* all_params, const float* all_grads, size_t first, size_t last) {
    const float lr = step.lr, grad_scale = step.grad_scale;
    const float b1 = c_.b1(), b2 = c_.b2(), eps = c_.eps(), wd = c_.weight_decay();
    const double td = static_cast<double>(step.t);
    const float step_size = static_cast<float>(lr / (1.0 - std::pow(double{b1}, td)));
    const float inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(double{b2}, td)));
    double update_sq = 0;
    for (size_t k = first; k < last; ++k) {
      const Segment& s = segments_[k];
      const float decay = s.decay ? lr * wd : 0.0f;
      float* params = all_params + s.flat;
      const float* grads = all_grads + s.flat;
      float* m = m_.values.data() + s.packed;
      float* v = v_.values.data() + s.packed;
      for (int64_t i = 0; i < s.size; ++i) {
        const float g = grads[i] * grad_scale;
        m[i] = b1 * m[i] + (1.0f - b1) * g;
        v[i] = b2 * v[i] + (1.0f - b2) * g * g;
        const float denom = std::sqrt(v[i]) * inv_sqrt_bc2 + eps;
        const float delta = step_size * m[i] / denom + decay * params[i];
        params[i] -= delta;
        if (kUpdateSq) update_sq += static_cast<double>(delta) * delta;
      }
    }
    return update_sq;
  }

 public:
  std::vector<StateBuffer*> state() override { return {&m_, &v_}; }

 private:
  config::AdamWConfig c_;
  StateBuffer m_, v_;
};

}  // namespace

Optimizer::Optimizer(const FlatLayout& layout, std::vector<Range> pieces) : pieces_(std::move(pieces)) {
  for (const Range& piece : pieces_) {
    layout.ForEachOverlap(piece, [&](int t, Range overlap) {
      segments_.push_back(Segment{overlap.begin, size_ + (overlap.begin - piece.begin), overlap.size(),
                                  layout.tensor(t).shape.size() >= 2});
    });
    size_ += piece.size();
  }
}

double Optimizer::Update(const UpdateStep& step, float* params, const float* grads, bool want_update_sq,
                         Range within) {
  // Segments lie inside pieces, and callers pass whole buckets: a segment
  // is in `within` or not at all, so the first and last found bound a run.
  size_t first = 0;
  while (first < segments_.size() && segments_[first].flat < within.begin) ++first;
  size_t last = first;
  while (last < segments_.size() && segments_[last].flat + segments_[last].size <= within.end) ++last;
  return UpdateSegments(step, params, grads, want_update_sq, first, last);
}

absl::StatusOr<std::unique_ptr<Optimizer>> Optimizer::Create(
    const config::OptimizerConfig& config, const FlatLayout& layout, std::vector<Range> pieces) {
  int64_t at = 0;
  for (const Range& p : pieces) {
    if (p.begin < at || p.end > layout.total_size() || p.begin > p.end) {
      return absl::InvalidArgumentError(absl::StrCat("optimizer piece [", p.begin, ", ", p.end,
                                                     ") is out of order or outside the ", layout.total_size(),
                                                     " parameters"));
    }
    at = p.end;
  }
  if (config.has_adamw()) {
    return std::unique_ptr<Optimizer>(new AdamW(config.adamw(), layout, std::move(pieces)));
  }
  return std::unique_ptr<Optimizer>(new Sgd(config.sgd(), layout, std::move(pieces)));
}

}  // namespace shardline
