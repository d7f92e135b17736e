#include "worker/model/products.h"

#include <algorithm>

#include "common/encoding/bf16.h"
#include "common/platform/clock.h"
#include "common/platform/logging.h"
#include "worker/model/grow.h"

namespace shardline {
namespace {

size_t Index(Slot slot) { return static_cast<size_t>(slot); }

}  // namespace

Matrix Matrix::Block(int row, int col, int block_rows, int block_cols) const {
  Matrix out = *this;
  const int64_t at = static_cast<int64_t>(row) * ld + col;
  if (f != nullptr) out.f = f + at;
  if (h != nullptr) out.h = h + at;
  out.rows = block_rows;
  out.cols = block_cols;
  out.weight = false;  // a part of a weight is rounded as any operand
  return out;
}

namespace {

// A matrix of that shape, its storage to be set.
Matrix Shaped(int rows, int cols, int ld) {
  Matrix m;
  m.rows = rows;
  m.cols = cols;
  m.ld = ld > 0 ? ld : cols;
  return m;
}

}  // namespace

Matrix Floats(const float* f, int rows, int cols, int ld) {
  Matrix m = Shaped(rows, cols, ld);
  m.f = f;
  return m;
}

Matrix RoundedBits(const Bf16* h, int rows, int cols, int ld) {
  Matrix m = Shaped(rows, cols, ld);
  m.h = h;
  return m;
}

Matrix WeightOf(const float* w, int rows, int cols) {
  Matrix m = Floats(w, rows, cols);
  m.weight = true;
  return m;
}

void RoundMatrix(const Matrix& m, Bf16* dst, int ld_dst) {
  SCHECK(m.f != nullptr) << "rounding a matrix that holds no floats";
  const int ld = ld_dst > 0 ? ld_dst : m.cols;
  for (int r = 0; r < m.rows; ++r) {
    RoundToBf16(absl::MakeConstSpan(m.f + static_cast<int64_t>(r) * m.ld, static_cast<size_t>(m.cols)),
                dst + static_cast<int64_t>(r) * ld);
  }
}

void ProductScratch::Note(Slot slot, int64_t elements) {
  int64_t& held = slots[Index(slot)];
  held = std::max(held, elements);
}

void ProductScratch::NoteStaging(int64_t floats) { staging = std::max(staging, floats); }

void ProductScratch::NoteProduct(int64_t a_elements, int64_t b_elements) {
  wide_a = std::max(wide_a, a_elements);
  wide_b = std::max(wide_b, b_elements);
}

int64_t ProductScratch::bytes(Precision precision, Bf16Kernel kernel) const {
  if (precision != Precision::kBfloat16) return 0;
  int64_t elements = 0;
  for (int64_t s : slots) elements += s;
  const int64_t floats = staging + (kernel == Bf16Kernel::kWidened ? wide_a + wide_b : 0);
  return elements * static_cast<int64_t>(sizeof(Bf16)) + floats * static_cast<int64_t>(sizeof(float));
}

const Bf16* Products::Bits(const Matrix& m, Slot slot, int* ld) {
  if (m.rounded()) {
    *ld = m.ld;
    return m.h;
  }
  *ld = m.cols;
  if (m.weight && m.ld == m.cols) {
    if (keep_weights_) return weights_.Get(m.f, m.rows, m.cols);
    slot = Slot::kWeight;
  }
  Bf16* dst = Grow(&slots_[Index(slot)], static_cast<size_t>(m.rows) * m.cols);
  RoundMatrix(m, dst);
  return dst;
}

Matrix Products::Round(const Matrix& m, Slot slot) {
  if (!bfloat16() || m.rounded()) return m;
  int ld = 0;
  const Bf16* h = Bits(m, slot, &ld);
  return RoundedBits(h, m.rows, m.cols, ld);
}

void Products::Multiply(bool trans_a, bool trans_b, float alpha, const Matrix& a, const Matrix& b, float beta,
                        float* c, int ldc) {
  const int m = trans_a ? a.cols : a.rows, k = trans_a ? a.rows : a.cols;
  const int n = trans_b ? b.rows : b.cols;
  SCHECK((trans_b ? b.cols : b.rows) == k) << "a product's operands disagree: op(A) is " << m << " x " << k
                                           << ", op(B) " << (trans_b ? b.cols : b.rows) << " x " << n;
  if (m == 0 || n == 0) return;
  if (!bfloat16()) {
    SCHECK(!a.rounded() && !b.rounded()) << "an FP32 product given a bfloat16 operand";
    Sgemm(trans_a, trans_b, m, n, k, alpha, a.f, a.ld, b.f, b.ld, beta, c, ldc);
    return;
  }
  int lda = 0, ldb = 0;
  const Bf16* ha = k > 0 ? Bits(a, Slot::kA, &lda) : nullptr;
  const Bf16* hb = k > 0 ? Bits(b, Slot::kB, &ldb) : nullptr;
  if (kernel_ == Bf16Kernel::kWidened && k > 0) {
    // The same rounded operands, multiplied exactly and summed in float32
    // by OpenBLAS (each product of two bfloat16 values is exact in float32).
    const float* wa = Widen(ha, a.rows, a.cols, lda, &wide_a_);
    const float* wb = Widen(hb, b.rows, b.cols, ldb, &wide_b_);
    Sgemm(trans_a, trans_b, m, n, k, alpha, wa, a.cols, wb, b.cols, beta, c, ldc);
    return;
  }
  GemmBf16(trans_a, trans_b, m, n, k, alpha, ha, lda, hb, ldb, beta, c, ldc);
}

const float* Products::Widen(const Bf16* h, int rows, int cols, int ld, std::vector<float>* wide) {
  float* out = Grow(wide, static_cast<size_t>(rows) * cols);
  for (int r = 0; r < rows; ++r) {
    WidenBf16(absl::MakeConstSpan(h + static_cast<int64_t>(r) * ld, static_cast<size_t>(cols)),
              out + static_cast<int64_t>(r) * cols);
  }
  return out;
}

float* Products::Staging(int64_t n) { return Grow(&staging_, static_cast<size_t>(n)); }

int64_t Products::scratch_bytes() const {
  int64_t sum = static_cast<int64_t>((staging_.capacity() + wide_a_.capacity() + wide_b_.capacity()) * sizeof(float));
  for (const std::vector<Bf16>& s : slots_) sum += static_cast<int64_t>(s.capacity() * sizeof(Bf16));
  return sum;
}

KeepRoundedWeights::KeepRoundedWeights(Products* products) : products_(products) {
  products_->weights_.Clear();
  products_->keep_weights_ = true;
}

KeepRoundedWeights::~KeepRoundedWeights() {
  products_->keep_weights_ = false;
  products_->weights_.Clear();
}

double MeasureGemmGflops(Env* env, Precision p, int n, double min_seconds) {
  const std::vector<float> a(static_cast<size_t>(n) * n, 0.5f), b(a.size(), 0.25f);
  std::vector<float> c(a.size());
  Products products(p);
  // In BF16 the operands rounded once, outside the timing: the products'
  // own rate.
  const Matrix ra = products.Round(Floats(a.data(), n, n), Slot::kSequence);
  const Matrix rb = products.Round(Floats(b.data(), n, n), Slot::kBlock);
  auto once = [&] { products.Multiply(false, false, 1.0f, ra, rb, 0.0f, c.data(), n); };
  once();  // warm up
  // The fastest product of those that fit in `min_seconds`: the peak, the
  // least disturbed by anything else running.
  const Stopwatch total(env);
  Stopwatch one(env);
  double best = 0;
  do {
    one.Lap();
    once();
    const double seconds = one.Lap();
    if (seconds > 0 && (best == 0 || seconds < best)) best = seconds;
  } while (total.ElapsedSeconds() < min_seconds);
  return best > 0 ? 2.0 * n * n * static_cast<double>(n) / best / 1e9 : 0;
}

}  // namespace shardline
