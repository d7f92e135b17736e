// What the model families' tests share: a random problem, parameters with
// non-zero biases, and the finite-difference check of every gradient entry.
#ifndef SHARDLINE_TESTS_WORKER_MODEL_MODEL_TEST_UTIL_H_
#define SHARDLINE_TESTS_WORKER_MODEL_MODEL_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/job/rng.h"
#include "tests/util/require_bf16.h"
#include "worker/model/model.h"
#include "worker/model/products.h"

namespace shardline {

struct Problem {
  std::vector<float> x;        // images: [n, features] in [-1, 1)
  std::vector<int32_t> tokens;  // sequences: [n, sequence]
  std::vector<int32_t> y;
  int n = 0;
  Examples examples() const {
    return tokens.empty() ? Images(x.data(), y.data(), n) : Sequences(tokens.data(), y.data(), n);
  }
};

// n random sequences of `seq` tokens below `vocab`, and random targets.
inline Problem RandomSequences(int n, int seq, int vocab, uint64_t seed) {
  Problem p;
  p.n = n;
  const RandomStream rng(seed, Purpose::kDropout, 1, 0);
  for (int i = 0; i < n * seq; ++i) {
    p.tokens.push_back(static_cast<int32_t>(rng.UniformInt(static_cast<uint64_t>(i), static_cast<uint64_t>(vocab))));
    p.y.push_back(static_cast<int32_t>(rng.UniformInt(static_cast<uint64_t>(1000000 + i), static_cast<uint64_t>(vocab))));
  }
  return p;
}

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
  model.ForwardBackward(params.data(), prob.examples(), scale, false, grads.data(), ws.get());
  auto loss = [&] { return model.Forward(params.data(), prob.examples(), ws.get()).loss_sum * scale; };
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

// The layer hooks' contract (model.h: LayerHooks): forward announces layers
// in ascending order, backward in descending order, each covering whole
// tensors and together every tensor once (a tied layer may be announced
// again later in a pass); no gradient is written before before_gradient
// announced it; what backward announced as final is what it returns
// (nothing touched afterwards). And a model reads only the layer it
// announced last, less what it announced final: run again with every other
// parameter NaN (as ZeRO-3 drops them), it gives the same loss and
// gradients, bit for bit. With accumulate too.
inline void CheckLayerHooks(const Model& model, const Problem& prob, const std::vector<float>& params) {
  const FlatLayout& layout = model.layout();
  const int64_t total = layout.total_size();
  std::vector<Range> forward, before_backward, backward;
  std::vector<float> grads(static_cast<size_t>(total), 0.5f), announced(grads.size(), -9.0f);
  auto first_time = [](std::vector<Range>* seen, Range r) {
    for (const Range& s : *seen) {
      if (s.begin == r.begin && s.end == r.end) return;
    }
    seen->push_back(r);
  };
  // No gradient is written before before_gradient announces it (ZeRO-3
  // maps the pool's pages under a bucket's gradients then, discarding what
  // was there: worker/train/exchange.h): at every hook, and at the end,
  // every gradient outside the parts announced so far is untouched.
  std::vector<char> grad_announced(grads.size(), 0);
  int64_t written_early = 0;
  auto check_written = [&] {
    for (size_t i = 0; i < grads.size(); ++i) written_early += !grad_announced[i] && grads[i] != 0.5f;
  };
  std::vector<Range> gradient_parts;
  std::vector<Range> forward_sequence, backward_sequence;  // every announcement, in order
  LayerHooks hooks;
  hooks.before_forward = [&](Range r) {
    first_time(&forward, r);
    forward_sequence.push_back(r);
  };
  hooks.before_backward = [&](Range r) {
    first_time(&before_backward, r);
    backward_sequence.push_back(r);
    check_written();
  };
  hooks.before_gradient = [&](Range r) {
    check_written();
    first_time(&gradient_parts, r);
    std::fill(grad_announced.begin() + r.begin, grad_announced.begin() + r.end, 1);
  };
  hooks.after_backward = [&](Range r) {
    check_written();
    backward.push_back(r);
    std::copy(grads.begin() + r.begin, grads.begin() + r.end, announced.begin() + r.begin);
  };
  std::unique_ptr<ModelWorkspace> ws = model.NewWorkspace();
  ws->hooks = &hooks;
  const BatchStats want = model.Forward(params.data(), prob.examples(), ws.get());
  model.Backward(params.data(), prob.examples(), 0.25f, /*accumulate=*/true, grads.data(),
                 ws.get());
  check_written();
  auto tiles = [&](std::vector<Range> layers, const char* pass) {
    std::sort(layers.begin(), layers.end(), [](const Range& a, const Range& b) { return a.begin < b.begin; });
    int64_t at = 0;
    for (const Range& r : layers) {
      EXPECT_EQ(r.begin, at) << pass << ": layers must tile the buffer";
      bool starts = false, ends = false;
      for (const TensorInfo& t : layout.tensors()) {
        starts = starts || t.offset == r.begin;
        ends = ends || t.range().end == r.end;
      }
      EXPECT_TRUE(starts && ends) << pass << ": [" << r.begin << ", " << r.end << ") is not whole tensors";
      at = r.end;
    }
    EXPECT_EQ(at, total) << pass;
  };
  EXPECT_EQ(written_early, 0) << "the backward wrote gradients of a layer it had not announced yet";
  tiles(forward, "forward");
  tiles(backward, "backward");
  tiles(gradient_parts, "before_gradient");
  std::sort(gradient_parts.begin(), gradient_parts.end(), [](const Range& a, const Range& b) { return a.begin < b.begin; });
  const std::vector<Range> declared = model.GradientParts();
  EXPECT_EQ(gradient_parts.size(), declared.size()) << "GradientParts() is not what the backward announces";
  for (size_t i = 0; i < std::min(gradient_parts.size(), declared.size()); ++i) {
    EXPECT_TRUE(gradient_parts[i].begin == declared[i].begin && gradient_parts[i].end == declared[i].end)
        << "part " << i << ": GradientParts() is not what the backward announces";
  }
  // The announcements the memory plan follows (memory_plan.cc,
  // StageThreeWindows): Layers() then ReadAgainAfterLast() in the forward,
  // BackwardReads() in the backward.
  std::vector<Range> declared_forward = model.Layers();
  for (const Range& r : model.ReadAgainAfterLast()) declared_forward.push_back(r);
  EXPECT_TRUE(forward_sequence == declared_forward) << "the forward announced other than Layers(), ReadAgainAfterLast()";
  EXPECT_TRUE(backward_sequence == model.BackwardReads()) << "the backward announced other than BackwardReads()";
  for (size_t i = 1; i < forward.size(); ++i) EXPECT_LT(forward[i - 1].begin, forward[i].begin) << "forward order";
  for (size_t i = 1; i < backward.size(); ++i) EXPECT_GT(backward[i - 1].begin, backward[i].begin) << "backward order";
  EXPECT_EQ(std::memcmp(announced.data(), grads.data(), grads.size() * sizeof(float)), 0)
      << "a gradient changed after its layer was announced final";

  // Only the layer announced last is there, less the parts announced final;
  // everything else is NaN.
  std::vector<float> present(params.size(), std::nanf("")), strict_grads(grads.size(), 0.5f);
  auto only = [&](Range r) {
    std::fill(present.begin(), present.end(), std::nanf(""));
    std::copy(params.begin() + r.begin, params.begin() + r.end, present.begin() + r.begin);
  };
  LayerHooks strict;
  strict.before_forward = only;
  strict.before_backward = only;
  strict.after_backward = [&](Range r) { std::fill(present.begin() + r.begin, present.begin() + r.end, std::nanf("")); };
  ws->hooks = &strict;
  const BatchStats got = model.Forward(present.data(), prob.examples(), ws.get());
  model.Backward(present.data(), prob.examples(), 0.25f, /*accumulate=*/true, strict_grads.data(), ws.get());
  EXPECT_EQ(got.loss_sum, want.loss_sum) << "the forward read a layer it had not announced last";
  EXPECT_EQ(got.correct, want.correct);
  for (size_t i = 0; i < grads.size(); ++i) {
    ASSERT_EQ(std::memcmp(&strict_grads[i], &grads[i], sizeof(float)), 0)
        << "gradient " << i << ": the backward read a layer it had not announced last";
  }
}

// The same model built without and with remat (train.remat): the same loss
// and gradients, bit for bit, from the same parameters and batch.
inline void CheckRematGivesTheSameBits(const Model& plain, const Model& remat, const Problem& prob,
                                       const std::vector<float>& params) {
  std::vector<float> g_plain(params.size()), g_remat(params.size());
  std::unique_ptr<ModelWorkspace> ws_plain = plain.NewWorkspace(), ws_remat = remat.NewWorkspace();
  const BatchStats a = plain.ForwardBackward(params.data(), prob.examples(), 0.5f, false, g_plain.data(),
                                             ws_plain.get());
  const BatchStats b = remat.ForwardBackward(params.data(), prob.examples(), 0.5f, false, g_remat.data(),
                                             ws_remat.get());
  EXPECT_EQ(a.loss_sum, b.loss_sum);
  EXPECT_EQ(std::memcmp(g_plain.data(), g_remat.data(), g_plain.size() * sizeof(float)), 0)
      << "remat changed the gradients";
  // Remat keeps each block's input and one block's activations.
  EXPECT_LT(ws_remat->bytes(), ws_plain->bytes());
}

// The same model in FP32 and BF16 (train.precision) from the same
// parameters and batch: bfloat16 products change the low bits (the
// gradients differ), not the result (the loss within 1% and the gradient
// within 5% in L2 of float32's); and BF16 gives the same bits every time.
// Returns the bytes each workspace held (FP32's, BF16's).
inline std::pair<int64_t, int64_t> CheckBfloatIsNearFloat(const Model& fp32, const Model& bf16, const Problem& prob,
                                   const std::vector<float>& params) {
  std::vector<float> g32(params.size()), g16(params.size()), again(params.size());
  std::unique_ptr<ModelWorkspace> ws32 = fp32.NewWorkspace(), ws16 = bf16.NewWorkspace();
  const BatchStats a = fp32.ForwardBackward(params.data(), prob.examples(), 0.5f, false, g32.data(), ws32.get());
  const BatchStats b = bf16.ForwardBackward(params.data(), prob.examples(), 0.5f, false, g16.data(), ws16.get());
  const BatchStats c = bf16.ForwardBackward(params.data(), prob.examples(), 0.5f, false, again.data(), ws16.get());
  EXPECT_NEAR(b.loss_sum, a.loss_sum, 1e-2 * std::fabs(a.loss_sum));
  EXPECT_NE(b.loss_sum, a.loss_sum) << "BF16 gave float32's loss: were the products bfloat16?";
  double diff = 0, norm = 0;
  for (size_t i = 0; i < g32.size(); ++i) {
    diff += (static_cast<double>(g16[i]) - g32[i]) * (static_cast<double>(g16[i]) - g32[i]);
    norm += static_cast<double>(g32[i]) * g32[i];
  }
  EXPECT_LT(std::sqrt(diff), 5e-2 * std::sqrt(norm));
  EXPECT_GT(diff, 0.0) << "BF16 gave float32's gradients";
  EXPECT_EQ(c.loss_sum, b.loss_sum);
  EXPECT_EQ(std::memcmp(g16.data(), again.data(), g16.size() * sizeof(float)), 0) << "BF16 is not deterministic";
  // What the passes keep, the products' scratch (float staging, rounded
  // operands: the same in any number of blocks) apart.
  return {ws32->bytes() - ws32->products.scratch_bytes(), ws16->bytes() - ws16->products.scratch_bytes()};
}

// A BF16 model's two micro-batches of one step (forward, backward, the
// second accumulating) with each weight rounded once (its workspace's
// products keeping the roundings, as the train step has them) give the bits
// of rounding at every product; the second micro-batch rounds nothing
// again, and after ForgetWeights the weights are rounded anew from what the
// parameters hold now.
inline void CheckRoundingOnceGivesTheSameBits(const Model& bf16, const Problem& prob, std::vector<float> params) {
  std::vector<float> every(params.size()), once(params.size());
  std::unique_ptr<ModelWorkspace> ws = bf16.NewWorkspace();
  const BatchStats a = bf16.ForwardBackward(params.data(), prob.examples(), 0.5f, false, every.data(), ws.get());
  const BatchStats a2 = bf16.ForwardBackward(params.data(), prob.examples(), 0.25f, true, every.data(), ws.get());
  EXPECT_EQ(ws->products.weights().roundings(), 0) << "a weight was kept rounded outside a KeepRoundedWeights";
  BatchStats b, b2;
  int64_t first = 0;
  {
    const KeepRoundedWeights keep(&ws->products);
    b = bf16.ForwardBackward(params.data(), prob.examples(), 0.5f, false, once.data(), ws.get());
    first = ws->products.weights().roundings();
    b2 = bf16.ForwardBackward(params.data(), prob.examples(), 0.25f, true, once.data(), ws.get());
  }
  EXPECT_EQ(a.loss_sum, b.loss_sum);
  EXPECT_EQ(a2.loss_sum, b2.loss_sum);
  EXPECT_EQ(std::memcmp(every.data(), once.data(), every.size() * sizeof(float)), 0)
      << "rounding the weights once changed the gradients";
  EXPECT_GT(first, 0) << "no product read a weight through the kept roundings";
  EXPECT_EQ(ws->products.weights().roundings(), first) << "a weight was rounded again within the step";
  // The parameters change (an update) and the roundings are forgotten
  // (a new scope, then ForgetWeights within it): each time the new
  // weights' bits, as a workspace that rounds at every product gives them.
  std::unique_ptr<ModelWorkspace> plain = bf16.NewWorkspace();
  std::vector<float> fresh(params.size());
  const KeepRoundedWeights keep(&ws->products);
  for (int change = 0; change < 2; ++change) {
    for (float& p : params) p *= 2.0f;  // exact: no rounding of its own
    if (change > 0) ws->products.ForgetWeights();
    const BatchStats cached = bf16.ForwardBackward(params.data(), prob.examples(), 0.5f, false, once.data(), ws.get());
    const BatchStats want =
        bf16.ForwardBackward(params.data(), prob.examples(), 0.5f, false, fresh.data(), plain.get());
    EXPECT_EQ(want.loss_sum, cached.loss_sum) << "change " << change;
    EXPECT_EQ(std::memcmp(fresh.data(), once.data(), once.size() * sizeof(float)), 0) << "change " << change;
  }
  EXPECT_EQ(ws->products.weights().roundings(), 3 * first);
}

// A transformer (the GPT, the ViT) that `make(precision, remat)` builds
// (absl::StatusOr<std::unique_ptr<Model>>): in BF16 near FP32 on `batch`
// with under 0.9x its workspace (the blocks keep their products' inputs
// as bfloat16 only), keeping the hooks contract on `small` without and with
// remat, and remat's bits on `batch`.
template <typename Make>
void CheckBfloatTransformer(Make make, const Problem& batch, const Problem& small) {
  auto fp32 = make(Precision::kFloat32, false), bf16 = make(Precision::kBfloat16, false),
       bf16_remat = make(Precision::kBfloat16, true);
  ASSERT_TRUE(fp32.ok() && bf16.ok() && bf16_remat.ok());
  const std::vector<float> params = InitParams(**fp32, 4);
  const auto [fp32_bytes, bf16_bytes] = CheckBfloatIsNearFloat(**fp32, **bf16, batch, params);
  EXPECT_LT(bf16_bytes, fp32_bytes * 0.9) << fp32_bytes;
  CheckLayerHooks(**bf16, small, params);
  CheckLayerHooks(**bf16_remat, small, params);
  CheckRematGivesTheSameBits(**bf16, **bf16_remat, batch, params);
  CheckRoundingOnceGivesTheSameBits(**bf16, small, params);
  CheckRoundingOnceGivesTheSameBits(**bf16_remat, small, params);
}

}  // namespace shardline

#endif  // SHARDLINE_TESTS_WORKER_MODEL_MODEL_TEST_UTIL_H_
