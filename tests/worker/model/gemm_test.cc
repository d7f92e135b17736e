// Products in bfloat16 (products.h over gemm.h's GemmBf16): operands rounded
// to nearest even (FloatToBf16), accumulated in float32, whatever the
// transposes, alpha and beta, with the same bits on every call; float32 is
// OpenBLAS's sgemm.
#include "worker/model/gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/base/casts.h"
#include "common/encoding/bf16.h"
#include "common/job/rng.h"
#include "tests/util/require_bf16.h"
#include "worker/model/products.h"

namespace shardline {
namespace {

float FromBits(uint32_t u) { return absl::bit_cast<float>(u); }
uint32_t Bits(float f) { return absl::bit_cast<uint32_t>(f); }

// C = alpha op(A) op(B) + beta C in BF16 through a fresh Products, the
// operands given as floats (A stored m x k, or k x m transposed; B k x n,
// or n x k), as Sgemm takes them.
void Bf16Gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int lda, const float* b, int ldb,
              float beta, float* c, int ldc) {
  Products products(Precision::kBfloat16);
  products.Multiply(ta, tb, alpha, Floats(a, ta ? k : m, ta ? m : k, lda), Floats(b, tb ? n : k, tb ? k : n, ldb),
                    beta, c, ldc);
}

std::vector<float> Random(size_t n, uint64_t seed) {
  const RandomStream rng(seed, Purpose::kDropout, 7, 0);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = 2 * rng.Uniform(i) - 1;
  return v;
}

// The rounding itself (ties, NaNs, infinities, every vector length) is
// common/encoding/bf16.h's, tested in bf16_test.cc; here: every row of a
// strided block into a strided destination.
TEST(RoundMatrixTest, EveryRowIsFloatToBf16OfItsFloats) {
  // Random floats of every magnitude, ties, denormals, signed zeros,
  // infinities and NaNs, in rows of 37 (two 16-wide vectors and a tail).
  const RandomStream rng(9, Purpose::kDropout, 8, 0);
  std::vector<float> v;
  for (int i = 0; i < 37 * 40; ++i) v.push_back(FromBits(static_cast<uint32_t>(rng.UniformInt(i, 1ull << 32))));
  const uint32_t special[] = {0x3f808000u, 0x3f818000u, 0x00000001u, 0x00008000u, 0x00018000u, 0x80000000u,
                              0x7f800000u, 0xff800000u, 0x7f800001u, 0x7fc00000u, 0xffffffffu, 0x7f7fffffu};
  for (size_t i = 0; i < sizeof(special) / sizeof(special[0]); ++i) v[i * 3] = FromBits(special[i]);
  std::vector<Bf16> out(37 * 40 + 40);
  RoundMatrix(Floats(v.data(), 40, 37), out.data(), 38);  // rows of 37 into rows of 38
  for (int r = 0; r < 40; ++r) {
    for (int j = 0; j < 37; ++j) {
      const uint16_t want = FloatToBf16(v[r * 37 + j]);
      ASSERT_EQ(out[r * 38 + j], want) << "row " << r << " element " << j << " bits " << Bits(v[r * 37 + j]);
    }
  }
}

TEST(BfloatGemmTest, OperandsRoundedOnceGiveTheBitsOfRoundingAtTheProduct) {
  SHARDLINE_REQUIRE_BF16();
  const int m = 40, n = 24, k = 70;
  const std::vector<float> a = Random(m * k, 11), b = Random(n * k, 12), c0 = Random(m * n, 13);
  std::vector<Bf16> ra(a.size()), rb(b.size());
  RoundMatrix(Floats(a.data(), m, k), ra.data());
  RoundMatrix(Floats(b.data(), n, k), rb.data());
  std::vector<float> want = c0, got = c0, mixed = c0, rounded_by_slot = c0;
  Bf16Gemm(false, true, m, n, k, 0.5f, a.data(), k, b.data(), k, 1.0f, want.data(), n);
  Products products(Precision::kBfloat16);
  products.Multiply(false, true, 0.5f, RoundedBits(ra.data(), m, k), RoundedBits(rb.data(), n, k), 1.0f, got.data(),
                    n);
  EXPECT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)));
  // One operand rounded, the other floats; and both rounded by Round.
  products.Multiply(false, true, 0.5f, RoundedBits(ra.data(), m, k), Floats(b.data(), n, k), 1.0f, mixed.data(), n);
  EXPECT_EQ(0, std::memcmp(want.data(), mixed.data(), want.size() * sizeof(float)));
  const Matrix a16 = products.Round(Floats(a.data(), m, k), Slot::kSequence);
  const Matrix b16 = products.Round(WeightOf(b.data(), n, k), Slot::kBlock);
  ASSERT_TRUE(a16.rounded() && b16.rounded());
  products.Multiply(false, true, 0.5f, a16, b16, 1.0f, rounded_by_slot.data(), n);
  EXPECT_EQ(0, std::memcmp(want.data(), rounded_by_slot.data(), want.size() * sizeof(float)));
}

TEST(ProductsTest, Float32IsSgemmAndRoundsNothing) {
  const int m = 9, n = 7, k = 13;
  const std::vector<float> x = Random(m * k, 21), w = Random(n * k, 22);
  std::vector<float> want(m * n), got(m * n);
  Sgemm(false, true, m, n, k, 1.0f, x.data(), k, w.data(), k, 0.0f, want.data(), n);
  Products products(Precision::kFloat32);
  const Matrix same = products.Round(Floats(x.data(), m, k), Slot::kSequence);
  EXPECT_FALSE(same.rounded());
  {
    const KeepRoundedWeights keep(&products);
    products.Multiply(false, true, 1.0f, same, WeightOf(w.data(), n, k), 0.0f, got.data(), n);
  }
  EXPECT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)));
  EXPECT_EQ(products.weights().roundings(), 0);
  EXPECT_EQ(products.scratch_bytes(), 0);
}

TEST(GemmTest, PrecisionNamesAreTheConfigsSpelling) {
  EXPECT_STREQ(PrecisionName(Precision::kFloat32), "FP32");
  EXPECT_STREQ(PrecisionName(Precision::kBfloat16), "BF16");
  EXPECT_TRUE(CheckPrecisionSupported(Precision::kFloat32).ok());
}

// C = alpha op(A) op(B) + beta C in double from given operands: the
// reference, from float32 operands or their bfloat16 rounding.
std::vector<double> Reference(bool ta, bool tb, int m, int n, int k, float alpha, const std::vector<float>& a,
                              const std::vector<float>& b, float beta, const std::vector<float>& c, bool round) {
  const auto in = [round](float x) { return static_cast<double>(round ? Bf16ToFloat(FloatToBf16(x)) : x); };
  std::vector<double> out(static_cast<size_t>(m) * n);
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double s = 0;
      for (int l = 0; l < k; ++l) {
        const float x = ta ? a[static_cast<size_t>(l) * m + i] : a[static_cast<size_t>(i) * k + l];
        const float y = tb ? b[static_cast<size_t>(j) * k + l] : b[static_cast<size_t>(l) * n + j];
        s += in(x) * in(y);
      }
      out[static_cast<size_t>(i) * n + j] = alpha * s + (beta == 0 ? 0.0 : beta * c[static_cast<size_t>(i) * n + j]);
    }
  }
  return out;
}

// (trans_a, trans_b, alpha, beta)
class BfloatGemmTest : public testing::TestWithParam<std::tuple<bool, bool, float, float>> {};

TEST_P(BfloatGemmTest, MultipliesRoundedOperandsInFloat32WithTheSameBitsEveryTime) {
  SHARDLINE_REQUIRE_BF16();
  const auto [ta, tb, alpha, beta] = GetParam();
  const int m = 37, n = 29, k = 300;
  const std::vector<float> a = Random(static_cast<size_t>(m) * k, 1), b = Random(static_cast<size_t>(k) * n, 2);
  const std::vector<float> c0 = Random(static_cast<size_t>(m) * n, 3);
  std::vector<float> c = c0;
  Bf16Gemm(ta, tb, m, n, k, alpha, a.data(), ta ? m : k, b.data(), tb ? k : n, beta, c.data(), n);
  const std::vector<double> rounded = Reference(ta, tb, m, n, k, alpha, a, b, beta, c0, true);
  const std::vector<double> exact = Reference(ta, tb, m, n, k, alpha, a, b, beta, c0, false);
  double worst_rounded = 0, worst_exact = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    worst_rounded = std::max(worst_rounded, std::abs(c[i] - rounded[i]));
    worst_exact = std::max(worst_exact, std::abs(c[i] - exact[i]));
  }
  // Float32 accumulation of 300 products of size <= 1: far below bfloat16's
  // rounding of the operands (about 2^-9 relative each), which the product
  // must show.
  EXPECT_LT(worst_rounded, 2e-5);
  EXPECT_GT(worst_exact, 1e-3);
  // The same call again, and on another thread (its own primitives): the same bits.
  std::vector<float> again = c0, other = c0;
  Bf16Gemm(ta, tb, m, n, k, alpha, a.data(), ta ? m : k, b.data(), tb ? k : n, beta, again.data(),
       n);
  // Captured by copy: C++17 lambdas cannot capture structured bindings (clang).
  std::thread t([&, ta = ta, tb = tb, alpha = alpha, beta = beta] {
    Bf16Gemm(ta, tb, m, n, k, alpha, a.data(), ta ? m : k, b.data(), tb ? k : n, beta,
         other.data(), n);
  });
  t.join();
  EXPECT_EQ(0, std::memcmp(c.data(), again.data(), c.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(c.data(), other.data(), c.size() * sizeof(float)));
}

INSTANTIATE_TEST_SUITE_P(TransposesAlphasAndBetas, BfloatGemmTest,
                         testing::Combine(testing::Bool(), testing::Bool(), testing::Values(1.0f, 0.125f),
                                          testing::Values(0.0f, 1.0f)));

TEST(BfloatGemmTest, WritesOnlyItsBlockOfALargerMatrixAndReadsNothingWithBetaZero) {
  SHARDLINE_REQUIRE_BF16();
  // A 4 x 3 product into columns 2..4 of a 4 x 8 matrix whose other
  // columns must stay as they are; C starts as NaN where it is written, which
  // beta 0 must not read.
  const int m = 4, n = 3, k = 5, ldc = 8;
  const std::vector<float> a = Random(m * k, 4), b = Random(k * n, 5);
  std::vector<float> c(m * ldc, 7.0f);
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) c[i * ldc + 2 + j] = std::numeric_limits<float>::quiet_NaN();
  }
  Bf16Gemm(false, false, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c.data() + 2, ldc);
  const std::vector<double> want = Reference(false, false, m, n, k, 1.0f, a, b, 0.0f, {}, true);
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < ldc; ++j) {
      if (j >= 2 && j < 2 + n) {
        EXPECT_NEAR(c[i * ldc + j], want[i * n + j - 2], 1e-6) << i << "," << j;
      } else {
        EXPECT_EQ(c[i * ldc + j], 7.0f) << i << "," << j;
      }
    }
  }
}

TEST(BfloatGemmTest, FollowsTheThreadCountWithTheSameBitsForAFixedCount) {
  SHARDLINE_REQUIRE_BF16();
  const int n = 256;
  const std::vector<float> a = Random(n * n, 6), b = Random(n * n, 7);
  std::vector<float> one(n * n), two(n * n), two_again(n * n);
  SetBlasThreads(1);
  Bf16Gemm(false, true, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, one.data(), n);
  SetBlasThreads(2);
  Bf16Gemm(false, true, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, two.data(), n);
  Bf16Gemm(false, true, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, two_again.data(), n);
  SetBlasThreads(1);
  EXPECT_EQ(0, std::memcmp(two.data(), two_again.data(), two.size() * sizeof(float)));
  for (size_t i = 0; i < one.size(); ++i) ASSERT_NEAR(one[i], two[i], 1e-4) << i;
}

// The widened kernel (a CPU without bfloat16 dot products, or
// SHARDLINE_BF16_KERNEL=widened) is OpenBLAS's sgemm on the rounded
// operands widened to float32, bit for bit; oneDNN's sums the same exact
// products in another order: the same values to float32's accumulation,
// not the same bits.
TEST(BfloatGemmTest, TheWidenedKernelIsSgemmOnTheRoundedOperands) {
  const int m = 33, n = 20, k = 257;
  const std::vector<float> a = Random(static_cast<size_t>(m) * k, 31), b = Random(static_cast<size_t>(n) * k, 32);
  std::vector<float> ra(a.size()), rb(b.size());
  for (size_t i = 0; i < a.size(); ++i) ra[i] = Bf16ToFloat(FloatToBf16(a[i]));
  for (size_t i = 0; i < b.size(); ++i) rb[i] = Bf16ToFloat(FloatToBf16(b[i]));
  std::vector<float> want(static_cast<size_t>(m) * n), widened(want.size()), onednn(want.size());
  Sgemm(false, true, m, n, k, 0.25f, ra.data(), k, rb.data(), k, 0.0f, want.data(), n);
  Products wide(Precision::kBfloat16, Bf16Kernel::kWidened);
  wide.Multiply(false, true, 0.25f, Floats(a.data(), m, k), WeightOf(b.data(), n, k), 0.0f, widened.data(), n);
  EXPECT_EQ(0, std::memcmp(want.data(), widened.data(), want.size() * sizeof(float)));
  EXPECT_GT(wide.scratch_bytes(), 0) << "the widened operands are the products' scratch";
  if (ProcessBf16Kernel() != Bf16Kernel::kOneDnn) return;
  Products dnn(Precision::kBfloat16, Bf16Kernel::kOneDnn);
  dnn.Multiply(false, true, 0.25f, Floats(a.data(), m, k), WeightOf(b.data(), n, k), 0.0f, onednn.data(), n);
  for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(onednn[i], want[i], 1e-5) << i;
}

TEST(GemmTest, TheBfloatPeakIsMeasuredThroughOneDnnsBfloatKernels) {
  if (ProcessBf16Kernel() != Bf16Kernel::kOneDnn) {
    GTEST_SKIP() << "this process multiplies bfloat16 operands " << Bf16KernelName(ProcessBf16Kernel());
  }
  EXPECT_NE(BfloatGemmImpl(false, true, 64, 64, 64).find("bf16"), std::string::npos)
      << BfloatGemmImpl(false, true, 64, 64, 64);
}

}  // namespace
}  // namespace shardline
