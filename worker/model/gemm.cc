#include "worker/model/gemm.h"
#include "common/platform/clock.h"

#include <cblas.h>

#include <vector>

namespace shardline {

void Sgemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
           int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  if (m == 0 || n == 0) return;
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c,
              ldc);
}

void SetBlasThreads(int threads) { openblas_set_num_threads(threads); }

const char* BlasCoreName() { return openblas_get_corename(); }

double MeasureSgemmGflops(Env* env, int n, double min_seconds) {
  std::vector<float> a(static_cast<size_t>(n) * n, 0.5f), b(a.size(), 0.25f), c(a.size());
  Sgemm(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);  // warm up
  // The fastest product of those that fit in `min_seconds`: the peak, the
  // least disturbed by anything else running.
  const Stopwatch total(env);
  Stopwatch one(env);
  double best = 0;
  do {
    one.Lap();
    Sgemm(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    const double seconds = one.Lap();
    if (seconds > 0 && (best == 0 || seconds < best)) best = seconds;
  } while (total.ElapsedSeconds() < min_seconds);
  return best > 0 ? 2.0 * n * n * static_cast<double>(n) / best / 1e9 : 0;
}

}  // namespace shardline
