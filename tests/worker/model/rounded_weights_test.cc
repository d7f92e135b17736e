// RoundedWeights: a weight rounded once until Clear, with the bits of
// RoundMatrix; buffers reused by the same weight after a Clear (ZeRO stage
// 2's steps) or by the next layer's (stage 3's), so what it holds stays
// bounded. Products keeping a weight's rounding (KeepRoundedWeights) give
// the bits of rounding it at every product.
#include "worker/model/rounded_weights.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "tests/util/require_bf16.h"
#include "worker/model/products.h"

namespace shardline {
namespace {

std::vector<float> Values(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>((i * 7919) % 1013) / 1013.0f - 0.37f;
  return v;
}

std::vector<Bf16> Rounded(const std::vector<float>& f, int rows, int cols) {
  std::vector<Bf16> h(f.size());
  RoundMatrix(Floats(f.data(), rows, cols), h.data());
  return h;
}

TEST(RoundedWeightsTest, AWeightIsRoundedOnceUntilClearedThenAgainFromItsNewValues) {
  std::vector<float> w = Values(12 * 5, 3.0f);
  RoundedWeights rounded;
  const Bf16* first = rounded.Get(w.data(), 12, 5);
  EXPECT_EQ(std::memcmp(first, Rounded(w, 12, 5).data(), w.size() * sizeof(Bf16)), 0);
  EXPECT_EQ(rounded.Get(w.data(), 12, 5), first);
  EXPECT_EQ(rounded.roundings(), 1);
  for (float& x : w) x += 1.0f;  // an update
  rounded.Clear();
  const Bf16* second = rounded.Get(w.data(), 12, 5);
  EXPECT_EQ(std::memcmp(second, Rounded(w, 12, 5).data(), w.size() * sizeof(Bf16)), 0);
  EXPECT_EQ(rounded.roundings(), 2);
}

TEST(RoundedWeightsTest, WhatItHoldsStaysThatOfTheMostWeightsBetweenTwoClears) {
  // Stage 2: the same three weights every step.
  const std::vector<float> a = Values(4096, 1), b = Values(1024, 2), c = Values(256, 3);
  RoundedWeights steps;
  int64_t held = 0;
  for (int step = 0; step < 5; ++step) {
    steps.Get(a.data(), 64, 64);
    steps.Get(b.data(), 32, 32);
    steps.Get(c.data(), 16, 16);
    steps.Clear();
    if (step == 0) held = steps.bytes();
    EXPECT_EQ(steps.bytes(), held) << "step " << step;
  }
  EXPECT_EQ(held, static_cast<int64_t>((4096 + 1024 + 256) * sizeof(Bf16)));
  // Stage 3: eight layers of two weights each, one layer at a time.
  std::vector<std::vector<float>> layers;
  for (int l = 0; l < 16; ++l) layers.push_back(Values(l % 2 == 0 ? 4096 : 1024, 1.0f + l));
  RoundedWeights per_layer;
  for (int l = 0; l < 8; ++l) {
    per_layer.Clear();
    const Bf16* big = per_layer.Get(layers[2 * l].data(), 64, 64);
    const Bf16* small = per_layer.Get(layers[2 * l + 1].data(), 32, 32);
    EXPECT_EQ(std::memcmp(big, Rounded(layers[2 * l], 64, 64).data(), 4096 * sizeof(Bf16)), 0);
    EXPECT_EQ(std::memcmp(small, Rounded(layers[2 * l + 1], 32, 32).data(), 1024 * sizeof(Bf16)), 0);
  }
  EXPECT_EQ(per_layer.bytes(), static_cast<int64_t>((4096 + 1024) * sizeof(Bf16)));
}

TEST(RoundedWeightsTest, AKeptWeightHasTheBitsOfRoundingAtEveryProductAsEitherOperand) {
  SHARDLINE_REQUIRE_BF16();
  const int m = 9, n = 7, k = 13;
  const std::vector<float> x = Values(static_cast<size_t>(m) * k, 2), w = Values(static_cast<size_t>(n) * k, 5);
  // y [m, n] = x [m, k] w^T (w stored [n, k]); z [n, m] = w x^T.
  std::vector<float> y_want(static_cast<size_t>(m) * n), y_got(y_want.size());
  std::vector<float> z_want(static_cast<size_t>(n) * m), z_got(z_want.size());
  Products every(Precision::kBfloat16);
  every.Multiply(false, true, 1.0f, Floats(x.data(), m, k), WeightOf(w.data(), n, k), 0.0f, y_want.data(), n);
  every.Multiply(false, true, 1.0f, WeightOf(w.data(), n, k), Floats(x.data(), m, k), 0.0f, z_want.data(), m);
  EXPECT_EQ(every.weights().roundings(), 0) << "a weight kept outside a KeepRoundedWeights";
  Products kept(Precision::kBfloat16);
  {
    const KeepRoundedWeights keep(&kept);
    kept.Multiply(false, true, 1.0f, Floats(x.data(), m, k), WeightOf(w.data(), n, k), 0.0f, y_got.data(), n);
    kept.Multiply(false, true, 1.0f, WeightOf(w.data(), n, k), Floats(x.data(), m, k), 0.0f, z_got.data(), m);
  }
  EXPECT_EQ(std::memcmp(y_want.data(), y_got.data(), y_want.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(z_want.data(), z_got.data(), z_want.size() * sizeof(float)), 0);
  EXPECT_EQ(kept.weights().roundings(), 1);  // both products read the one rounding of w
  // Outside the scope again: rounded at the product, kept roundings untouched.
  kept.Multiply(false, true, 1.0f, Floats(x.data(), m, k), WeightOf(w.data(), n, k), 0.0f, y_got.data(), n);
  EXPECT_EQ(kept.weights().roundings(), 1);
  EXPECT_EQ(std::memcmp(y_want.data(), y_got.data(), y_want.size() * sizeof(float)), 0);
}

}  // namespace
}  // namespace shardline
