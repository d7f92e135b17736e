// The one place that talks to OpenBLAS. Row-major single-precision GEMM and
// the BLAS thread count.
//
//   // C[m,n] = A[m,k] * B[k,n]
//   Sgemm(false, false, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
#ifndef SHARDLINE_WORKER_MODEL_GEMM_H_
#define SHARDLINE_WORKER_MODEL_GEMM_H_

#include "common/platform/env.h"

namespace shardline {

// C = alpha * op(A) * op(B) + beta * C, all row-major; op(X) is X or X^T.
// op(A) is m x k, op(B) is k x n, C is m x n. With beta == 0, C is not read.
void Sgemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
           int lda, const float* b, int ldb, float beta, float* c, int ldc);

// Sets OpenBLAS's thread count for this process (it defaults to every core).
void SetBlasThreads(int threads);

// The kernel family OpenBLAS runs ("Cooperlake", "Haswell", ...): its own
// pick for this CPU, or OPENBLAS_CORETYPE's.
const char* BlasCoreName();

// Measures this process's sgemm throughput on an n x n x n product, repeating
// it for at least min_seconds. Returns the fastest product's GFLOP/s (2 n^3
// per product). Used as the peak for MFU.
double MeasureSgemmGflops(Env* env, int n, double min_seconds);

}  // namespace shardline

#endif  // SHARDLINE_WORKER_MODEL_GEMM_H_
