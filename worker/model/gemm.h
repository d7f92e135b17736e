// The one place that talks to OpenBLAS and oneDNN: row-major matrix
// products on operands as the libraries take them, and the thread count of
// both libraries. Models do not call these: their products go through
// Products (products.h), which rounds operands in the job's precision.
//
//   // C[m,n] = A[m,k] * B[k,n]
//   Sgemm(false, false, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
//
// Sgemm is OpenBLAS's. GemmBf16 multiplies bfloat16 operands in oneDNN's
// matmul, accumulating in float32 into a float32 C; alpha and beta are
// applied to the float32 product inside oneDNN's kernel. Both are
// deterministic for a fixed shape and thread count: the same inputs give
// the same bits.
#ifndef SHARDLINE_WORKER_MODEL_GEMM_H_
#define SHARDLINE_WORKER_MODEL_GEMM_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace shardline {

// The precision of a job's matrix products (config train.precision).
enum class Precision { kFloat32, kBfloat16 };

// "FP32" or "BF16", as the config spells them.
const char* PrecisionName(Precision p);

// C = alpha * op(A) * op(B) + beta * C in float32, all row-major; op(X) is
// X or X^T. op(A) is m x k, op(B) is k x n, C is m x n. With beta == 0, C is
// not read.
void Sgemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
           int ldb, float beta, float* c, int ldc);

// A bfloat16 value's bits: FloatToBf16's (common/encoding/bf16.h).
using Bf16 = uint16_t;

// Sgemm's product on bfloat16 operands (the same arguments), accumulated
// in float32; with k == 0, C = beta * C.
void GemmBf16(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const Bf16* a, int lda, const Bf16* b,
              int ldb, float beta, float* c, int ldc);

// How this process multiplies bfloat16 operands (train.precision BF16),
// chosen at run time. kOneDnn: oneDNN's matmul on the CPU's bfloat16 dot
// products (AVX512_BF16 or AMX, as oneDNN sees them: the CPU, or a lower
// ONEDNN_MAX_CPU_ISA). kWidened, on every other CPU: each operand widened
// to float32 (exactly: a bfloat16 is a float32 with its low 16 bits zero)
// and multiplied by OpenBLAS's sgemm, accumulating in float32 - the same
// products of the same rounded operands, summed in another order. Each is
// deterministic; the two differ in the last bits, which the numerics
// fingerprint (worker/train/numerics.h) tells apart.
// SHARDLINE_BF16_KERNEL=widened takes kWidened on any CPU (to test it, or
// to match workers of CPUs without bfloat16); =onednn insists on kOneDnn.
enum class Bf16Kernel { kOneDnn, kWidened };

// This process's kernel: read once (SHARDLINE_BF16_KERNEL, the CPU).
Bf16Kernel ProcessBf16Kernel();
// For people: "oneDNN avx512_core_bf16" or "widened to float32, OpenBLAS
// Haswell sgemm".
std::string Bf16KernelName(Bf16Kernel kernel);

// OK when this process can run `p`'s products: always, but for
// SHARDLINE_BF16_KERNEL set to something else than "widened" or "onednn"
// (INVALID_ARGUMENT) or to "onednn" on a CPU without bfloat16 dot products
// (FAILED_PRECONDITION naming what is missing).
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

// C[m,n] = A[m,k] * B[k,n] (row-major, contiguous) in oneDNN's float32
// matmul: for the bench only, beside OpenBLAS's sgemm. No job runs it:
// Precision::kFloat32 stays on OpenBLAS, and its bits.
void DnnlFloatGemm(int m, int n, int k, const float* a, const float* b, float* c);

// The implementation oneDNN picks for a bfloat16 product of this shape
// (e.g. "brg:avx512_core_bf16"): for the logs and the bench.
std::string BfloatGemmImpl(bool trans_a, bool trans_b, int m, int n, int k);

}  // namespace shardline

#endif  // SHARDLINE_WORKER_MODEL_GEMM_H_
