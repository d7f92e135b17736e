// What the model families' tests share: a random problem, parameters with
// non-zero biases, and the finite-difference check of every gradient entry.
#ifndef SHARDLINE_TESTS_WORKER_MODEL_MODEL_TEST_UTIL_H_
#define SHARDLINE_TESTS_WORKER_MODEL_MODEL_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "common/rng.h"
#include "worker/model/model.h"

namespace shardline {

struct Problem {
  std::vector<float> x;  // [n, features] in [-1, 1)
  std::vector<int32_t> y;
  int n = 0;
};

inline Problem RandomProblem(int n, int features, int classes, uint64_t seed) {
  Problem p;
  p.n = n;
  const RandomStream rng(seed, Purpose::kDropout, 0, 0);
  for (int i = 0; i < n * features; ++i) p.x.push_back(2 * rng.Uniform(static_cast<uint64_t>(i)) - 1);
  for (int i = 0; i < n; ++i) {
    p.y.push_back(static_cast<int32_t>(rng.UniformInt(static_cast<uint64_t>(100000 + i), static_cast<uint64_t>(classes))));
  }
  return p;
}

// The model's initial parameters with non-zero biases, so their gradients
// are exercised away from the origin.
inline std::vector<float> InitParams(const Model& model, uint64_t seed) {
  std::vector<float> p(static_cast<size_t>(model.layout().total_size()));
  model.InitRange(seed, Range{0, model.layout().total_size()}, p.data());
  for (const TensorInfo& t : model.layout().tensors()) {
    if (t.shape.size() == 1) {
      for (int64_t i = 0; i < t.size; ++i) p[static_cast<size_t>(t.offset + i)] = 0.1f * ((i % 3) - 1);
    }
  }
  return p;
}

// Every analytic gradient entry (Backward, loss scaled by 1/n) against a
// central finite difference of the loss, with EXPECT failures naming
// `label` and the entry. Where a ReLU or max-pool kink lies within +-eps of
// the point, the left and right one-sided differences disagree by more
// than kink_rel * |right| + kink_abs, the central difference means nothing,
// and the entry is skipped. Returns how many entries were checked.
inline size_t CheckGradients(const Model& model, const Problem& prob, std::vector<float> params,
                             const std::string& label, double kink_rel, double kink_abs) {
  std::vector<float> grads(params.size());
  const std::unique_ptr<ModelWorkspace> ws = model.NewWorkspace();
  const float scale = 1.0f / prob.n;
  model.ForwardBackward(params.data(), prob.x.data(), prob.y.data(), prob.n, scale, false, grads.data(), ws.get());
  auto loss = [&] { return model.Forward(params.data(), prob.x.data(), prob.y.data(), prob.n, ws.get()).loss_sum * scale; };
  const double center = loss();
  const float eps = 1e-3f;
  size_t checked = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    const float saved = params[i];
    params[i] = saved + eps;
    const double up = loss();
    params[i] = saved - eps;
    const double down = loss();
    params[i] = saved;
    const double right = (up - center) / eps, left = (center - down) / eps;
    if (std::fabs(right - left) > kink_rel * std::fabs(right) + kink_abs) continue;
    const double numeric = (up - down) / (2 * eps);
    EXPECT_NEAR(grads[i], numeric, 1e-3 + 1e-2 * std::fabs(numeric)) << label << " param " << i;
    ++checked;
  }
  return checked;
}

}  // namespace shardline

#endif  // SHARDLINE_TESTS_WORKER_MODEL_MODEL_TEST_UTIL_H_
