// Every transformer op's backward against central finite differences of its
// forward (a random weighting of the outputs as the loss), and the
// properties the models rely on: causality, normalised attention rows,
// accumulation.
#include "worker/model/transformer_ops.h"

#include <cmath>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "common/job/rng.h"
#include "worker/model/transformer_block.h"

namespace shardline {
namespace {

std::vector<float> Random(size_t n, uint64_t seed, float scale = 1.0f) {
  const RandomStream rng(seed, Purpose::kDropout, 7, 0);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * (2 * rng.Uniform(i) - 1);
  return v;
}

double Dot(const std::vector<float>& a, const std::vector<float>& w) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * w[i];
  return s;
}

// For every element of *x: the analytic gradient against (loss(x+eps) -
// loss(x-eps)) / 2eps, where loss reruns the forward.
void CheckFd(std::vector<float>* x, const std::function<double()>& loss, const std::vector<float>& analytic,
             const std::string& what) {
  ASSERT_EQ(x->size(), analytic.size()) << what;
  const float eps = 1e-3f;
  for (size_t i = 0; i < x->size(); ++i) {
    const float saved = (*x)[i];
    (*x)[i] = saved + eps;
    const double up = loss();
    (*x)[i] = saved - eps;
    const double down = loss();
    (*x)[i] = saved;
    const double numeric = (up - down) / (2 * eps);
    EXPECT_NEAR(analytic[i], numeric, 2e-3 + 2e-2 * std::fabs(numeric)) << what << " element " << i;
  }
}

TEST(TransformerOpsTest, LayerNormGradientsMatchFiniteDifferences) {
  const int rows = 3, d = 8;
  std::vector<float> x = Random(rows * d, 1, 2.0f), gamma = Random(d, 2), beta = Random(d, 3);
  const std::vector<float> w = Random(rows * d, 4);
  std::vector<float> y(rows * d), mean(rows), rstd(rows);
  auto loss = [&] {
    LayerNormForward(x.data(), gamma.data(), beta.data(), rows, d, y.data(), mean.data(), rstd.data());
    return Dot(y, w);
  };
  loss();
  std::vector<float> dx(x.size()), dgamma(d), dbeta(d);
  LayerNormBackward(w.data(), x.data(), mean.data(), rstd.data(), gamma.data(), rows, d, false, dx.data(),
                    dgamma.data(), dbeta.data());
  CheckFd(&x, loss, dx, "dx");
  CheckFd(&gamma, loss, dgamma, "dgamma");
  CheckFd(&beta, loss, dbeta, "dbeta");
  // Accumulating adds the same again.
  std::vector<float> dgamma2 = dgamma, dbeta2 = dbeta;
  loss();
  LayerNormBackward(w.data(), x.data(), mean.data(), rstd.data(), gamma.data(), rows, d, true, dx.data(),
                    dgamma2.data(), dbeta2.data());
  for (int i = 0; i < d; ++i) EXPECT_FLOAT_EQ(dgamma2[i], 2 * dgamma[i]);
}

TEST(TransformerOpsTest, LinearGradientsMatchFiniteDifferences) {
  const int rows = 4, in = 5, out = 3;
  std::vector<float> x = Random(rows * in, 5), wt = Random(out * in, 6), b = Random(out, 7);
  const std::vector<float> w = Random(rows * out, 8);
  std::vector<float> y(rows * out);
  Products fp32;
  auto loss = [&] {
    LinearForward(&fp32, Floats(x.data(), rows, in), wt.data(), b.data(), out, y.data());
    return Dot(y, w);
  };
  loss();
  // y = x W^T + b, W [out, in]: y[0][0] by hand.
  double by_hand = b[0];
  for (int i = 0; i < in; ++i) by_hand += static_cast<double>(x[i]) * wt[i];
  EXPECT_NEAR(y[0], by_hand, 1e-5);
  std::vector<float> dx(x.size()), dw(wt.size()), db(out);
  LinearBackward(&fp32, w.data(), Floats(x.data(), rows, in), wt.data(), out, false, dx.data(), dw.data(), db.data());
  CheckFd(&x, loss, dx, "dx");
  CheckFd(&wt, loss, dw, "dW");
  CheckFd(&b, loss, db, "db");
}

TEST(TransformerOpsTest, FastTanhIsWithinFourTenthsOfAMillionthOfTanh) {
  double worst = 0;
  float worst_at = 0;
  for (float x = -12.0f; x <= 12.0f; x += 1.0f / 4096) {
    const double err = std::abs(static_cast<double>(FastTanh(x)) - std::tanh(static_cast<double>(x)));
    if (err > worst) {
      worst = err;
      worst_at = x;
    }
  }
  EXPECT_LT(worst, 4e-7) << "at " << worst_at;
  EXPECT_EQ(FastTanh(0.0f), 0.0f);
  EXPECT_EQ(FastTanh(-3.0f), -FastTanh(3.0f));  // odd
  EXPECT_NEAR(FastTanh(1e-5f), 1e-5f, 1e-11);   // no cancellation near 0
  EXPECT_EQ(FastTanh(100.0f), FastTanh(7.90531110763549805f));
}

TEST(TransformerOpsTest, GeluIsTheTanhApproximationAndItsGradientMatches) {
  std::vector<float> x = Random(40, 9, 4.0f);
  const std::vector<float> w = Random(40, 10);
  std::vector<float> y(x.size());
  std::vector<float> t(x.size());
  auto loss = [&] {
    GeluForward(x.data(), static_cast<int64_t>(x.size()), y.data(), t.data());
    return Dot(y, w);
  };
  loss();
  // PyTorch's gelu(approximate="tanh") at 1.0 and -2.0.
  float probe[2] = {1.0f, -2.0f}, out[2];
  GeluForward(probe, 2, out);
  EXPECT_NEAR(out[0], 0.841192f, 1e-6);
  EXPECT_NEAR(out[1], -0.045402f, 1e-6);
  std::vector<float> dx(x.size()), y_alone(x.size());
  GeluForward(x.data(), static_cast<int64_t>(x.size()), y_alone.data());  // without keeping tanh: the same bits
  EXPECT_EQ(y, y_alone);
  GeluBackward(w.data(), x.data(), t.data(), static_cast<int64_t>(x.size()), dx.data());
  CheckFd(&x, loss, dx, "dx");
}

// (causal, seq): 5 is one block of queries; 70 is three (32, 32 and 6 rows),
// so the causal path skips masked blocks and sums dK and dV over blocks.
class AttentionTest : public testing::TestWithParam<std::tuple<bool, int>> {};

TEST_P(AttentionTest, GradientsMatchFiniteDifferencesAndRowsAreDistributions) {
  const bool causal = std::get<0>(GetParam());
  const int seq = std::get<1>(GetParam());
  const int batch = seq > 32 ? 1 : 2, d = 8, heads = 2;
  std::vector<float> qkv = Random(batch * seq * 3 * d, 11);
  const std::vector<float> w = Random(batch * seq * d, 12);
  std::vector<float> probs(batch * heads * seq * seq), y(batch * seq * d);
  Products fp32;
  auto loss = [&] {
    AttentionForward(&fp32, Floats(qkv.data(), batch * seq, 3 * d), batch, seq, heads, causal, probs.data(), y.data());
    return Dot(y, w);
  };
  loss();
  for (int r = 0; r < batch * heads * seq; ++r) {
    double sum = 0;
    for (int j = 0; j < seq; ++j) {
      const float p = probs[r * seq + j];
      if (causal && j > r % seq) {
        EXPECT_EQ(p, 0.0f) << "row " << r << " attends to a later position " << j;
      }
      sum += p;
    }
    EXPECT_NEAR(sum, 1.0, 1e-5) << "row " << r;
  }
  std::vector<float> dqkv(qkv.size()), scratch(seq * seq);
  AttentionBackward(&fp32, w.data(), Floats(qkv.data(), batch * seq, 3 * d), probs.data(), batch, seq, heads, causal,
                    dqkv.data(), scratch.data());
  CheckFd(&qkv, loss, dqkv, causal ? "causal dqkv" : "full dqkv");
}

TEST(AttentionCausalityTest, APositionsOutputDoesNotDependOnLaterPositions) {
  const int batch = 1, seq = 6, d = 4, heads = 1;
  std::vector<float> qkv = Random(seq * 3 * d, 13), probs(seq * seq), y(seq * d), y2(seq * d);
  Products fp32;
  AttentionForward(&fp32, Floats(qkv.data(), seq, 3 * d), batch, seq, heads, true, probs.data(), y.data());
  for (int i = 3 * 3 * d; i < seq * 3 * d; ++i) qkv[i] += 1.0f;  // positions 3.. change
  AttentionForward(&fp32, Floats(qkv.data(), seq, 3 * d), batch, seq, heads, true, probs.data(), y2.data());
  for (int i = 0; i < 3 * d; ++i) EXPECT_EQ(y[i], y2[i]) << "position " << i / d;
  bool later_changed = false;
  for (int i = 3 * d; i < seq * d; ++i) later_changed = later_changed || y[i] != y2[i];
  EXPECT_TRUE(later_changed);
}

INSTANTIATE_TEST_SUITE_P(CausalAndFull, AttentionTest, testing::Combine(testing::Bool(), testing::Values(5, 70)));

TEST(TransformerOpsTest, EmbeddingGradientsMatchFiniteDifferences) {
  const int batch = 2, seq = 3, d = 4, vocab = 5;
  const std::vector<int32_t> tokens = {1, 4, 1, 0, 1, 3};
  std::vector<float> wte = Random(vocab * d, 14), wpe = Random(seq * d, 15);
  const std::vector<float> w = Random(batch * seq * d, 16);
  std::vector<float> x(batch * seq * d);
  auto loss = [&] {
    EmbeddingForward(tokens.data(), wte.data(), wpe.data(), batch, seq, d, x.data());
    return Dot(x, w);
  };
  loss();
  std::vector<float> dwte(wte.size(), 0.0f), dwpe(wpe.size(), 5.0f);  // dwpe overwritten
  EmbeddingBackward(w.data(), tokens.data(), batch, seq, d, /*accumulate_wpe=*/false, dwte.data(), dwpe.data());
  CheckFd(&wte, loss, dwte, "dwte");
  CheckFd(&wpe, loss, dwpe, "dwpe");
}

TEST(TransformerBlockTest, ABlocksGradientsMatchFiniteDifferences) {
  for (const bool causal : {true, false}) {
    const BlockShape shape{8, 2, 16, causal};
    FlatLayout layout;
    const BlockTensors t = AddBlock(&layout, "h.0.", shape);
    EXPECT_EQ(layout.tensor(t.attn_w).name, "h.0.attn.c_attn.weight");
    EXPECT_EQ(t.range.size(), layout.total_size());
    const int batch = 2, seq = 4, rows = batch * seq;
    std::vector<float> params = Random(static_cast<size_t>(layout.total_size()), 17, 0.5f);
    std::vector<float> x = Random(rows * shape.d, 18);
    const std::vector<float> w = Random(rows * shape.d, 19);
    BlockActivations acts;
    std::vector<float> out(rows * shape.d);
    Products fp32;
    auto loss = [&] {
      BlockForward(BlockCall{params.data(), layout, t, shape, batch, seq, 0, 1, &fp32}, x.data(), &acts, out.data());
      return Dot(out, w);
    };
    loss();
    std::vector<float> grads(params.size()), dx = w;
    BlockScratch scratch;
    BlockBackward(BlockCall{params.data(), layout, t, shape, batch, seq, 0, 1, &fp32}, acts, false, grads.data(),
                  &scratch, dx.data());
    CheckFd(&params, loss, grads, causal ? "causal block params" : "full block params");
    CheckFd(&x, loss, dx, causal ? "causal block dx" : "full block dx");
  }
}

}  // namespace
}  // namespace shardline
