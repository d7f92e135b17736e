// The one place that talks to OpenBLAS and oneDNN: row-major matrix
// products in a job's precision, and the thread count of both libraries.
//
//   // C[m,n] = A[m,k] * B[k,n]
//   Gemm(Precision::kFloat32, false, false, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
//
// kFloat32 is OpenBLAS's sgemm. kBfloat16 rounds A and B to bfloat16
// (round to nearest even: FloatToBf16, common/encoding/bf16.h) and
// multiplies them in oneDNN's
// matmul, accumulating in float32 into a float32 C; alpha and beta are
// applied to the float32 product inside oneDNN's kernel. Both are
// deterministic for a fixed shape and thread count: the same inputs give
// the same bits.
#ifndef SHARDLINE_WORKER_MODEL_GEMM_H_
#define SHARDLINE_WORKER_MODEL_GEMM_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "common/platform/env.h"

namespace shardline {

// The precision of a job's matrix products (config train.precision).
enum class Precision { kFloat32, kBfloat16 };

// "FP32" or "BF16", as the config spells them.
const char* PrecisionName(Precision p);

// C = alpha * op(A) * op(B) + beta * C, all row-major; op(X) is X or X^T.
// op(A) is m x k, op(B) is k x n, C is m x n. With beta == 0, C is not read.
void Gemm(Precision p, bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
          const float* b, int ldb, float beta, float* c, int ldc);

// Bfloat16 operands rounded once and used in several products (attention's
// keys and values, for every block of queries): FloatToBf16's bits.
using Bf16 = uint16_t;

// dst (row stride ld_dst) = FloatToBf16 of rows x cols floats of src (row
// stride ld_src), row by row through RoundToBf16.
void RoundToBfloat16(const float* src, int rows, int cols, int ld_src, Bf16* dst, int ld_dst);

// Gemm(Precision::kBfloat16, ...) on operands already rounded: the same
// bits as Gemm on the floats they were rounded from.
void GemmBf16(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const Bf16* a, int lda, const Bf16* b,
              int ldb, float beta, float* c, int ldc);

// OK when this process can run `p`'s products at full speed. kBfloat16
// needs the CPU's AVX512_BF16 instructions as oneDNN sees them (the CPU, or
// a lower ONEDNN_MAX_CPU_ISA): FAILED_PRECONDITION naming what is missing
// otherwise. No slow emulation is ever chosen silently.
absl::Status CheckPrecisionSupported(Precision p);

// The CPU's matrix-product features this process sees, as oneDNN names its
// ISA ("avx512_core_bf16", "avx512_core_amx", "avx2", ...): what a worker
// reports so a world whose workers differ is named.
const char* CpuMatmulIsa();

// Sets OpenBLAS's and oneDNN's thread counts for this process (they
// default to every core). oneDNN's (OpenMP's) applies to every thread that
// calls Gemm afterwards.
void SetBlasThreads(int threads);

// The kernel family OpenBLAS runs ("Cooperlake", "Haswell", ...): its own
// pick for this CPU, or OPENBLAS_CORETYPE's.
const char* BlasCoreName();

// Measures this process's throughput in `p` on an n x n x n product,
// repeating it for at least min_seconds. Returns the fastest product's
// GFLOP/s (2 n^3 per product). Used as the peak for MFU.
double MeasureGemmGflops(Env* env, Precision p, int n, double min_seconds);
inline double MeasureSgemmGflops(Env* env, int n, double min_seconds) {
  return MeasureGemmGflops(env, Precision::kFloat32, n, min_seconds);
}

// C[m,n] = A[m,k] * B[k,n] (row-major, contiguous) in oneDNN's float32
// matmul: for the bench only, beside OpenBLAS's sgemm. No job runs it:
// Precision::kFloat32 stays on OpenBLAS, and its bits.
void DnnlFloatGemm(int m, int n, int k, const float* a, const float* b, float* c);

// The implementation oneDNN picks for a bfloat16 product of this shape
// (e.g. "brg:avx512_core_bf16"): for the logs and the bench.
std::string BfloatGemmImpl(bool trans_a, bool trans_b, int m, int n, int k);

}  // namespace shardline

#endif  // SHARDLINE_WORKER_MODEL_GEMM_H_
