#include "worker/model/cnn.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "common/job/rng.h"
#include "tests/worker/model/model_test_util.h"
#include "worker/model/conv.h"
#include "worker/model/pool.h"

namespace shardline {
namespace {

std::vector<float> RandomVector(size_t n, uint64_t seed) {
  const RandomStream rng(seed, Purpose::kDropout, 0, 0);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = 2 * rng.Uniform(i) - 1;
  return v;
}

double Dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

// Odd sizes, several channels and both kernel sizes: every element of cols
// is the input pixel the definition names (or zero in the padding).
TEST(ConvTest, Im2ColMatchesItsDefinition) {
  for (int k : {1, 3, 5}) {
    const ConvGeometry g{2, 1, k, 5, 7};
    const int n = 3;
    const std::vector<float> in = RandomVector(static_cast<size_t>(g.in_channels * n * g.pixels()), 1);
    std::vector<float> cols(static_cast<size_t>(g.col_rows() * n * g.pixels()));
    std::vector<float> padded(static_cast<size_t>(g.in_channels * n * g.padded_pixels()));
    PadImages(g, n, in.data(), padded.data());
    Im2Col(g, n, 0, n, padded.data(), cols.data());
    const int p = g.pad();
    size_t checked = 0;
    for (int c = 0; c < g.in_channels; ++c) {
      for (int i = 0; i < k; ++i) {
        for (int j = 0; j < k; ++j) {
          const int64_t row = (c * k + i) * k + j;
          for (int b = 0; b < n; ++b) {
            for (int y = 0; y < g.height; ++y) {
              for (int x = 0; x < g.width; ++x) {
                const int sy = y + i - p, sx = x + j - p;
                const bool inside = sy >= 0 && sy < g.height && sx >= 0 && sx < g.width;
                const float want = inside ? in[static_cast<size_t>(((c * n + b) * g.height + sy) * g.width + sx)] : 0.0f;
                const int64_t col = (b * g.height + y) * g.width + x;
                ASSERT_EQ(cols[static_cast<size_t>(row * n * g.pixels() + col)], want)
                    << "k " << k << " c " << c << " i " << i << " j " << j << " b " << b << " y " << y << " x " << x;
                ++checked;
              }
            }
          }
        }
      }
    }
    EXPECT_EQ(checked, cols.size());
  }
}

// Col2Im is Im2Col's adjoint: <Im2Col(x), c> = <x, Col2Im(c)>. That is
// exactly what the convolution's input gradient needs.
TEST(ConvTest, Col2ImIsTheAdjointOfIm2Col) {
  for (int k : {3, 5}) {
    const ConvGeometry g{3, 1, k, 7, 5};
    const int n = 2;
    const std::vector<float> x = RandomVector(static_cast<size_t>(g.in_channels * n * g.pixels()), 2);
    const std::vector<float> c = RandomVector(static_cast<size_t>(g.col_rows() * n * g.pixels()), 3);
    std::vector<float> cols(c.size()), back(x.size(), 0.0f);
    std::vector<float> padded(static_cast<size_t>(g.in_channels * n * g.padded_pixels())), dpadded(padded.size(), 0.0f);
    PadImages(g, n, x.data(), padded.data());
    Im2Col(g, n, 0, n, padded.data(), cols.data());
    Col2Im(g, n, 0, n, c.data(), dpadded.data());
    UnpadImages(g, n, dpadded.data(), back.data());
    EXPECT_NEAR(Dot(cols, c), Dot(x, back), 1e-4 * std::fabs(Dot(cols, c)) + 1e-4) << "k " << k;
  }
}

// A chunk of images [first, first + count) gives exactly the columns of
// those images in the whole batch's cols, and Col2Im of a chunk touches only
// those images.
TEST(ConvTest, ChunksAreTheWholeBatchsColumns) {
  const ConvGeometry g{2, 1, 3, 5, 7};
  const int n = 5, first = 2, count = 2;
  const std::vector<float> in = RandomVector(static_cast<size_t>(g.in_channels * n * g.pixels()), 4);
  const int64_t whole_n = n * g.pixels(), part_n = count * g.pixels();
  std::vector<float> whole(static_cast<size_t>(g.col_rows() * whole_n)), part(static_cast<size_t>(g.col_rows() * part_n));
  std::vector<float> padded(static_cast<size_t>(g.in_channels * n * g.padded_pixels()));
  PadImages(g, n, in.data(), padded.data());
  Im2Col(g, n, 0, n, padded.data(), whole.data());
  Im2Col(g, n, first, count, padded.data(), part.data());
  for (int64_t r = 0; r < g.col_rows(); ++r) {
    for (int64_t j = 0; j < part_n; ++j) {
      ASSERT_EQ(part[static_cast<size_t>(r * part_n + j)], whole[static_cast<size_t>(r * whole_n + first * g.pixels() + j)]);
    }
  }
  std::vector<float> dpadded(padded.size(), 0.0f), din(in.size());
  Col2Im(g, n, first, count, part.data(), dpadded.data());
  UnpadImages(g, n, dpadded.data(), din.data());
  for (int c = 0; c < g.in_channels; ++c) {
    for (int b = 0; b < n; ++b) {
      const bool inside = b >= first && b < first + count;
      double sum = 0;
      for (int64_t i = 0; i < g.pixels(); ++i) sum += std::fabs(din[static_cast<size_t>((c * n + b) * g.pixels() + i)]);
      EXPECT_EQ(sum > 0, inside) << "channel " << c << " image " << b;
    }
  }
  EXPECT_GT(ConvChunk(g, 1000), 1);
  EXPECT_LE(ConvChunk(g, 3), 3);
  EXPECT_EQ(ConvChunk(ConvGeometry{512, 512, 5, 64, 64}, 8), 1);  // never zero
}

TEST(ConvTest, MaxPoolKeepsTheFirstLargestAndRoutesItsGradient) {
  // One 2x4 plane: windows [1 5; 2 5] (tie: the first 5 wins) and [0 -1; 7 3].
  const std::vector<float> in = {1, 5, 0, -1, 2, 5, 7, 3};
  std::vector<float> out(2);
  std::vector<uint8_t> argmax(2);
  MaxPool2x2(1, 2, 4, in.data(), out.data(), argmax.data());
  EXPECT_EQ(out, (std::vector<float>{5, 7}));
  EXPECT_EQ(argmax, (std::vector<uint8_t>{1, 2}));
  const std::vector<float> dout = {0.5f, -2.0f};
  std::vector<float> din(8, 9.0f);
  ReluMaxPool2x2Backward(1, 2, 4, dout.data(), out.data(), argmax.data(), din.data());
  EXPECT_EQ(din, (std::vector<float>{0, 0.5f, 0, 0, 0, 0, -2.0f, 0}));
  // A winner the ReLU zeroed passes no gradient.
  const std::vector<float> zeroed = {0, 7};
  ReluMaxPool2x2Backward(1, 2, 4, dout.data(), zeroed.data(), argmax.data(), din.data());
  EXPECT_EQ(din, (std::vector<float>{0, 0, 0, 0, 0, 0, -2.0f, 0}));
}

TEST(ConvTest, RowSumsAddEveryElementOfEachRow) {
  const std::vector<float> in = RandomVector(3 * 37, 8);  // 37: lanes and a tail
  std::vector<float> out = {1, 1, 1};
  RowSums(3, 37, in.data(), /*accumulate=*/true, out.data());
  for (int r = 0; r < 3; ++r) {
    double want = 1;
    for (int i = 0; i < 37; ++i) want += in[static_cast<size_t>(r * 37 + i)];
    EXPECT_NEAR(out[static_cast<size_t>(r)], want, 1e-5) << r;
  }
  RowSums(3, 37, in.data(), /*accumulate=*/false, out.data());
  EXPECT_NEAR(out[0] + 1, [&] { double w = 1; for (int i = 0; i < 37; ++i) w += in[static_cast<size_t>(i)]; return w; }(), 1e-5);
}

// On random planes with many ties (values from a small set), pooling keeps
// the first largest of each window, as the plain definition does, and the
// backward writes every element: dout at each positive winner, else zero.
// Row widths cover every path of pool.cc: fewer than 4 windows (one at a
// time), 4..7 (vectors of 4, the last overlapping), 8 and more (vectors of
// 8, with and without an overlapping last one).
TEST(ConvTest, PoolingMatchesTheDefinitionWithTiesAtEveryRowWidth) {
  for (const int w : {2, 6, 8, 10, 14, 16, 18, 28, 30, 34}) {
    SCOPED_TRACE(testing::Message() << "width " << w);
    const int planes = 3, h = 4;
    std::vector<float> in = RandomVector(static_cast<size_t>(planes * h * w), 5 + w);
    for (float& v : in) v = std::round(v * 2);  // -2..2: ties are common
    std::vector<float> out(static_cast<size_t>(planes * h * w / 4));
    std::vector<uint8_t> argmax(out.size());
    MaxPool2x2(planes, h, w, in.data(), out.data(), argmax.data());
    const std::vector<float> dout = RandomVector(out.size(), 6 + w);
    std::vector<float> din(in.size(), 9.0f);
    ReluMaxPool2x2Backward(planes, h, w, dout.data(), out.data(), argmax.data(), din.data());
    size_t o = 0;
    for (int q = 0; q < planes; ++q) {
      for (int y = 0; y < h; y += 2) {
        for (int x = 0; x < w; x += 2, ++o) {
          const size_t at = static_cast<size_t>((q * h + y) * w + x);
          const size_t pos[4] = {at, at + 1, at + w, at + w + 1};
          int best = 0;
          for (int t = 1; t < 4; ++t) {
            if (in[pos[t]] > in[pos[best]]) best = t;
          }
          ASSERT_EQ(argmax[o], best) << "window " << o;
          ASSERT_EQ(out[o], in[pos[best]]) << "window " << o;
          for (int t = 0; t < 4; ++t) {
            const float want = t == best && out[o] > 0 ? dout[o] : 0.0f;
            ASSERT_EQ(din[pos[t]], want) << "window " << o << " position " << t;
          }
        }
      }
    }
  }
}

Problem ImageProblem(const InputShape& in, int n, uint64_t seed) {
  return RandomProblem(n, in.features(), in.num_classes, seed);
}

std::unique_ptr<Cnn> MustCreate(CnnSpec spec) {
  absl::StatusOr<std::unique_ptr<Cnn>> cnn = Cnn::Create(std::move(spec));
  EXPECT_TRUE(cnn.ok()) << cnn.status();
  return cnn.ok() ? std::move(*cnn) : nullptr;
}

struct GradCase {
  std::string name;
  CnnSpec spec;
};

CnnSpec OddSizes() {  // two input channels, 5x7, no pooling, kernels 3 and 5
  CnnSpec s;
  s.input = InputShape{2, 5, 7, 3};
  s.conv = {{3, 3, false}, {2, 5, false}};
  s.dense_sizes = {4};
  return s;
}
CnnSpec Pooled() {  // 6x10 -> pool 3x5 (odd) -> conv -> dense
  CnnSpec s;
  s.input = InputShape{1, 6, 10, 4};
  s.conv = {{3, 3, true}, {2, 3, false}};
  s.dense_sizes = {5};
  return s;
}
CnnSpec TwoPools() {  // 8x4 -> 4x2 -> 2x1, no hidden dense layer
  CnnSpec s;
  s.input = InputShape{1, 8, 4, 3};
  s.conv = {{2, 3, true}, {3, 1, true}};
  return s;
}

class CnnGradientTest : public ::testing::TestWithParam<GradCase> {};

// Every analytic gradient entry matches a central finite difference of the
// scaled loss, end to end through every layer kind (dense, flatten, pool,
// ReLU, conv input and weight gradients). Entries at a ReLU or max-pool kink
// (left and right differences disagree) are skipped; nearly all are checked.
TEST_P(CnnGradientTest, MatchesFiniteDifferences) {
  const std::unique_ptr<Cnn> cnn = MustCreate(GetParam().spec);
  ASSERT_NE(cnn, nullptr);
  const std::vector<float> params = InitParams(*cnn, 3);
  // One-sided differences carry ~1e-4 of float rounding; beyond that they
  // disagree only at a kink.
  const size_t checked = CheckGradients(*cnn, ImageProblem(cnn->input(), 5, 7), params, GetParam().name, 0.01, 3e-4);
  EXPECT_GE(checked, params.size() * 90 / 100);
}

TEST_P(CnnGradientTest, LayerHooksAnnounceEveryLayerInPassOrder) {
  const std::unique_ptr<Cnn> cnn = MustCreate(GetParam().spec);
  ASSERT_NE(cnn, nullptr);
  CheckLayerHooks(*cnn, ImageProblem(cnn->input(), 5, 7), InitParams(*cnn, 3));
}

TEST_P(CnnGradientTest, Bfloat16IsNearFloat32AndKeepsTheHooksContract) {
  SHARDLINE_REQUIRE_BF16();
  CnnSpec spec = GetParam().spec;
  const std::unique_ptr<Cnn> fp32 = MustCreate(spec);
  spec.precision = Precision::kBfloat16;
  const std::unique_ptr<Cnn> bf16 = MustCreate(spec);
  ASSERT_NE(fp32, nullptr);
  ASSERT_NE(bf16, nullptr);
  const std::vector<float> params = InitParams(*fp32, 3);
  CheckBfloatIsNearFloat(*fp32, *bf16, ImageProblem(fp32->input(), 6, 7), params);
  CheckLayerHooks(*bf16, ImageProblem(fp32->input(), 5, 7), params);
  CheckRoundingOnceGivesTheSameBits(*bf16, ImageProblem(fp32->input(), 5, 7), params);
}

INSTANTIATE_TEST_SUITE_P(Shapes, CnnGradientTest,
                         ::testing::Values(GradCase{"OddSizes", OddSizes()}, GradCase{"Pooled", Pooled()},
                                           GradCase{"TwoPools", TwoPools()}),
                         [](const auto& info) { return info.param.name; });

// With accumulate, a second pass adds its gradients to the first's.
TEST(CnnTest, AccumulateAddsToExistingGradients) {
  const std::unique_ptr<Cnn> cnn = MustCreate(Pooled());
  const Problem prob = ImageProblem(cnn->input(), 4, 9);
  const std::vector<float> params = InitParams(*cnn, 5);
  const std::unique_ptr<ModelWorkspace> ws = cnn->NewWorkspace();
  std::vector<float> once(params.size()), twice(params.size());
  cnn->ForwardBackward(params.data(), Images(prob.x.data(), prob.y.data(), prob.n), 1.0f, false, once.data(), ws.get());
  cnn->ForwardBackward(params.data(), Images(prob.x.data(), prob.y.data(), prob.n), 1.0f, false, twice.data(), ws.get());
  cnn->ForwardBackward(params.data(), Images(prob.x.data(), prob.y.data(), prob.n), 1.0f, true, twice.data(), ws.get());
  for (size_t i = 0; i < params.size(); ++i) EXPECT_NEAR(twice[i], 2 * once[i], 1e-5 + 1e-5 * std::fabs(once[i])) << i;
}

TEST(CnnTest, LayoutUsesPyTorchNamesAndShapes) {
  CnnSpec s;
  s.input = InputShape{1, 28, 28, 10};
  s.conv = {{32, 3, true}, {64, 3, true}};
  s.dense_sizes = {128};
  const std::unique_ptr<Cnn> cnn = MustCreate(s);
  const std::vector<TensorInfo>& t = cnn->layout().tensors();
  ASSERT_EQ(t.size(), 8u);
  EXPECT_EQ(t[0].name, "conv0/w");
  EXPECT_EQ(t[0].shape, (std::vector<int64_t>{32, 1, 3, 3}));
  EXPECT_EQ(t[2].name, "conv1/w");
  EXPECT_EQ(t[2].shape, (std::vector<int64_t>{64, 32, 3, 3}));
  EXPECT_EQ(t[4].name, "dense0/w");
  EXPECT_EQ(t[4].shape, (std::vector<int64_t>{128, 64 * 7 * 7}));
  EXPECT_EQ(t[7].name, "dense1/b");
  EXPECT_EQ(t[7].shape, (std::vector<int64_t>{10}));
  // conv0 fwd+wgrad, conv1 fwd+wgrad+dgrad, two dense layers x6.
  const int64_t conv0 = 32LL * 9 * 784, conv1 = 64LL * 288 * 196;
  EXPECT_EQ(cnn->TrainFlopsPerExample(), 4 * conv0 + 6 * conv1 + 6 * (3136LL * 128 + 128 * 10));
}

TEST(CnnTest, InitOfAnyRangeEqualsTheSameSliceOfTheWhole) {
  const std::unique_ptr<Cnn> cnn = MustCreate(Pooled());
  const int64_t total = cnn->layout().total_size();
  std::vector<float> whole(static_cast<size_t>(total));
  cnn->InitRange(11, Range{0, total}, whole.data());
  for (const Range r : {Range{0, 7}, Range{5, 40}, Range{total / 2, total}}) {
    std::vector<float> part(static_cast<size_t>(r.size()));
    cnn->InitRange(11, r, part.data());
    for (int64_t i = 0; i < r.size(); ++i) ASSERT_EQ(part[static_cast<size_t>(i)], whole[static_cast<size_t>(r.begin + i)]);
  }
}

// Evaluate splits a large batch; the sums are those of one Forward.
TEST(CnnTest, EvaluateInChunksMatchesOneForward) {
  const std::unique_ptr<Cnn> cnn = MustCreate(Pooled());
  const int n = Cnn::kEvalChunk * 2 + 17;
  const Problem prob = ImageProblem(cnn->input(), n, 4);
  const std::vector<float> params = InitParams(*cnn, 6);
  const std::unique_ptr<ModelWorkspace> ws = cnn->NewWorkspace();
  const BatchStats whole = cnn->Forward(params.data(), Images(prob.x.data(), prob.y.data(), n), ws.get());
  const BatchStats chunked = cnn->Evaluate(params.data(), Images(prob.x.data(), prob.y.data(), n), ws.get());
  EXPECT_EQ(chunked.count, n);
  EXPECT_EQ(chunked.correct, whole.correct);
  EXPECT_NEAR(chunked.loss_sum, whole.loss_sum, 1e-4 * whole.loss_sum);
}

void ExpectRejected(CnnSpec s, const std::string& field) {
  absl::StatusOr<std::unique_ptr<Cnn>> cnn = Cnn::Create(std::move(s));
  ASSERT_FALSE(cnn.ok());
  EXPECT_EQ(cnn.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(cnn.status().message(), field)) << cnn.status();
}

TEST(CnnTest, LayersThatDoNotFitTheImageNameTheirField) {
  CnnSpec s;
  s.input = InputShape{1, 28, 28, 10};
  s.conv = {{8, 3, true}, {8, 3, true}, {8, 3, true}};  // 28 -> 14 -> 7: the third pool does not fit
  ExpectRejected(s, "model.cnn.conv[2].pool");
  s.conv = {{8, 31, false}};
  ExpectRejected(s, "model.cnn.conv[0].kernel_size");
  s.conv = {{8, 4, false}};
  ExpectRejected(s, "model.cnn.conv[0]");
  s.conv = {};
  ExpectRejected(s, "model.cnn.conv");
}

}  // namespace
}  // namespace shardline
