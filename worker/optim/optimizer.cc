#include "worker/optim/optimizer.h"

#include <cmath>

#include "common/checkpoint/buffer_names.h"

namespace shardline {
namespace {

// p -= lr * (v + wd * p) with v = momentum * v + g (PyTorch's SGD, decoupled
// decay); Nesterov uses g + momentum * v in place of v.
class Sgd : public Optimizer {
 public:
  Sgd(const config::SgdConfig& c, const FlatLayout& layout, Range shard)
      : Optimizer(layout, shard), c_(c) {
    momentum_.name = kMomentumBuffer;
    momentum_.values.assign(static_cast<size_t>(shard.size()), 0.0f);
  }

  double Update(int64_t t, float lr, float grad_scale, float* params, const float* grads,
                bool want_update_sq) override {
    if (c_.nesterov()) {
      return want_update_sq ? Run<true, true>(lr, grad_scale, params, grads)
                            : Run<true, false>(lr, grad_scale, params, grads);
    }
    return want_update_sq ? Run<false, true>(lr, grad_scale, params, grads)
                          : Run<false, false>(lr, grad_scale, params, grads);
  }

 private:
  template <bool kNesterov, bool kUpdateSq>
  double Run(float lr, float grad_scale, float* params, const float* grads) {
    const float mu = c_.momentum(), wd = c_.weight_decay();
    float* v = momentum_.values.data();
    double update_sq = 0;
    for (const Segment& s : segments_) {
      const float decay = s.decay ? wd : 0.0f;
      for (int64_t i = s.begin; i < s.end; ++i) {
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
  AdamW(const config::AdamWConfig& c, const FlatLayout& layout, Range shard)
      : Optimizer(layout, shard), c_(c) {
    m_.name = kAdamMBuffer;
    v_.name = kAdamVBuffer;
    m_.values.assign(static_cast<size_t>(shard.size()), 0.0f);
    v_.values.assign(static_cast<size_t>(shard.size()), 0.0f);
  }

  double Update(int64_t t, float lr, float grad_scale, float* params, const float* grads,
                bool want_update_sq) override {
    return want_update_sq ? Run<true>(t, lr, grad_scale, params, grads)
                          : Run<false>(t, lr, grad_scale, params, grads);
  }

 private:
  template <bool kUpdateSq>
  double Run(int64_t t, float lr, float grad_scale, float* params, const float* grads) {
    const float b1 = c_.b1(), b2 = c_.b2(), eps = c_.eps(), wd = c_.weight_decay();
    const double td = static_cast<double>(t);
    const float step_size = static_cast<float>(lr / (1.0 - std::pow(double{b1}, td)));
    const float inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(double{b2}, td)));
    float* m = m_.values.data();
    float* v = v_.values.data();
    double update_sq = 0;
    for (const Segment& s : segments_) {
      const float decay = s.decay ? lr * wd : 0.0f;
      for (int64_t i = s.begin; i < s.end; ++i) {
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

Optimizer::Optimizer(const FlatLayout& layout, Range shard) : shard_(shard) {
  layout.ForEachOverlap(shard, [&](int t, Range overlap) {
    segments_.push_back(Segment{overlap.begin - shard.begin, overlap.end - shard.begin,
                                layout.tensor(t).shape.size() >= 2});
  });
}

absl::StatusOr<std::unique_ptr<Optimizer>> Optimizer::Create(
    const config::OptimizerConfig& config, const FlatLayout& layout, Range shard) {
  if (shard.begin < 0 || shard.end > layout.total_size() || shard.begin > shard.end) {
    return absl::InvalidArgumentError("optimizer shard is outside the parameter layout");
  }
  if (config.has_adamw()) {
    return std::unique_ptr<Optimizer>(new AdamW(config.adamw(), layout, shard));
  }
  return std::unique_ptr<Optimizer>(new Sgd(config.sgd(), layout, shard));
}

}  // namespace shardline
