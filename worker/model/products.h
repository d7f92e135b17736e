// The one entry point of a model's matrix products, and everything they
// hold besides their operands (train.precision).
//
// A product reads Matrix operands: a row-major matrix with its shape and
// row stride, held as floats or as their bfloat16 rounding. Products
// multiplies them in the job's precision: in FP32 the floats through
// OpenBLAS's sgemm; in BF16 it rounds each operand that is not rounded yet
// (FloatToBf16, round to nearest even) and multiplies the roundings with
// the process's bfloat16 kernel (gemm.h: oneDNN's on a CPU with bfloat16
// dot products, else the roundings widened to float32 in OpenBLAS's
// sgemm). A rounding is a pure function of the floats, so an operand
// rounded once and read by several products gives the bits of rounding it
// at each.
//
//   Products& p = ws->products;
//   // y [rows, out] = x [rows, in] W^T, W stored [out, in]
//   p.Multiply(false, true, 1.0f, Floats(x, rows, in), WeightOf(w, out, in), 0.0f, y, out);
//
// What it holds, all in the model's workspace (so the memory plan counts
// it: ProductScratch) and passed to the ops explicitly (no thread-locals):
// - scratch by Slot for operands rounded per product, or once for several
//   (attention's sequence, an output gradient, a block of probabilities);
// - float staging for a value a model keeps only rounded;
// - with the widened kernel, each product's two operands widened to float32;
// - the weights' roundings (RoundedWeights): while a KeepRoundedWeights
//   scope is alive, each weight is rounded at its first product and kept
//   until ForgetWeights; outside one, a weight is rounded at every product
//   that reads it (the same bits).
// Not thread-safe: one Products per thread, as its workspace.
#ifndef SHARDLINE_WORKER_MODEL_PRODUCTS_H_
#define SHARDLINE_WORKER_MODEL_PRODUCTS_H_

#include <array>
#include <cstdint>
#include <vector>

#include "common/platform/env.h"
#include "worker/model/gemm.h"
#include "worker/model/rounded_weights.h"

namespace shardline {

// rows x cols elements, row-major with row stride ld (>= cols): floats (f)
// or bfloat16 bits already rounded (h), exactly one of them set.
struct Matrix {
  const float* f = nullptr;
  const Bf16* h = nullptr;
  int rows = 0;
  int cols = 0;
  int ld = 0;
  // A parameter matrix, stored contiguously (ld == cols), that does not
  // change while a KeepRoundedWeights scope is alive: its rounding may be
  // kept.
  bool weight = false;

  bool rounded() const { return h != nullptr; }
  // The rows x cols block at (row, col), a view of the same storage.
  Matrix Block(int row, int col, int rows, int cols) const;
};

// Floats f [rows, cols] with row stride ld (0: cols).
Matrix Floats(const float* f, int rows, int cols, int ld = 0);
// Bits h [rows, cols], already rounded, with row stride ld (0: cols).
Matrix RoundedBits(const Bf16* h, int rows, int cols, int ld = 0);
// The parameter matrix w [rows, cols], contiguous.
Matrix WeightOf(const float* w, int rows, int cols);

// dst [m.rows, m.cols] (row stride ld_dst, 0: m.cols) = the rounding of
// float matrix m, row by row (RoundToBf16). The only place a matrix is
// rounded: Products' slots, RoundedWeights and a model's kept copies all
// call it.
void RoundMatrix(const Matrix& m, Bf16* dst, int ld_dst = 0);

// Where Products keeps a rounded operand. kA and kB: a product's own
// operands given as floats, rounded for that product only; kWeight: a
// weight outside a KeepRoundedWeights scope. The others hold a rounding
// made by Round for several products.
enum class Slot { kA, kB, kWeight, kSequence, kOutputGrad, kBlock, kCount };

// The most a Products holds, for a model's shapes: elements of each slot,
// floats of staging and, for the widened kernel, of each product's operands
// A and B as stored (Note the largest each asks for). What
// Model::WorkspaceBytes adds for its products.
struct ProductScratch {
  std::array<int64_t, static_cast<size_t>(Slot::kCount)> slots{};
  int64_t staging = 0;
  int64_t wide_a = 0, wide_b = 0;
  void Note(Slot slot, int64_t elements);
  void NoteStaging(int64_t floats);
  // A product whose operands hold a_elements and b_elements.
  void NoteProduct(int64_t a_elements, int64_t b_elements);
  // Bytes held in `precision` with `kernel`: none in FP32 (nothing is
  // rounded, staged or widened).
  int64_t bytes(Precision precision, Bf16Kernel kernel = ProcessBf16Kernel()) const;
};

class Products {
 public:
  explicit Products(Precision precision = Precision::kFloat32, Bf16Kernel kernel = ProcessBf16Kernel())
      : precision_(precision), kernel_(kernel) {}
  Products(const Products&) = delete;
  Products& operator=(const Products&) = delete;
  Products(Products&&) = default;
  Products& operator=(Products&&) = default;

  Precision precision() const { return precision_; }
  Bf16Kernel kernel() const { return kernel_; }
  bool bfloat16() const { return precision_ == Precision::kBfloat16; }

  // C [m, n] = alpha op(A) op(B) + beta C (row stride ldc), op(X) X or
  // X^T: op(A) is m x k and op(B) k x n, from the operands' shapes (which
  // must agree). With beta == 0, C is not read. In FP32 both operands must
  // be floats.
  void Multiply(bool trans_a, bool trans_b, float alpha, const Matrix& a, const Matrix& b, float beta, float* c,
                int ldc);

  // m as the products read it, rounded once for several of them: in BF16
  // its rounding, made into `slot` (m itself if already rounded; a weight
  // through the kept roundings when kept); in FP32 m itself. Valid until
  // the next Round into the same slot.
  Matrix Round(const Matrix& m, Slot slot);

  // n floats for a value that is written, then kept only rounded (BF16):
  // valid until the next call.
  float* Staging(int64_t n);

  // Every kept weight rounding forgotten: the parameters are about to
  // change, or (ZeRO stage 3) the layer they belong to is given back.
  void ForgetWeights() { weights_.Clear(); }
  const RoundedWeights& weights() const { return weights_; }

  // Bytes of the slots and the staging (capacity): part of the
  // workspace's bytes(). The kept weights are not: the memory plan counts
  // them with the parameters.
  int64_t scratch_bytes() const;

 private:
  friend class KeepRoundedWeights;

  // The operand as bfloat16: m's bits, a kept weight's, or m rounded into
  // `slot` (a weight outside a scope: kWeight).
  const Bf16* Bits(const Matrix& m, Slot slot, int* ld);

  // The widened kernel: rows x cols bits at h (row stride ld) into `wide`.
  static const float* Widen(const Bf16* h, int rows, int cols, int ld, std::vector<float>* wide);

  Precision precision_;
  Bf16Kernel kernel_;
  bool keep_weights_ = false;
  RoundedWeights weights_;
  std::array<std::vector<Bf16>, static_cast<size_t>(Slot::kCount)> slots_;
  std::vector<float> staging_;
  std::vector<float> wide_a_, wide_b_;  // the widened kernel's operands
};

// While alive, `products` keeps each weight's rounding from its first
// product on (BF16): a step's passes read every weight several times
// (forward, remat's recomputed forward, the backward's input gradients,
// every micro-batch). The caller promises the weights do not change while
// it lives, or calls ForgetWeights when they do. Kept roundings are
// forgotten when it starts and when it ends.
class KeepRoundedWeights {
 public:
  explicit KeepRoundedWeights(Products* products);
  ~KeepRoundedWeights();
  KeepRoundedWeights(const KeepRoundedWeights&) = delete;
  KeepRoundedWeights& operator=(const KeepRoundedWeights&) = delete;

 private:
  Products* const products_;
};

// Measures this process's throughput in `p` on an n x n x n product of
// operands rounded before (BF16), repeating it for at least min_seconds.
// Returns the fastest product's GFLOP/s (2 n^3 per product): the peak for
// MFU.
double MeasureGemmGflops(Env* env, Precision p, int n, double min_seconds);
inline double MeasureSgemmGflops(Env* env, int n, double min_seconds) {
  return MeasureGemmGflops(env, Precision::kFloat32, n, min_seconds);
}

}  // namespace shardline

#endif  // SHARDLINE_WORKER_MODEL_PRODUCTS_H_
