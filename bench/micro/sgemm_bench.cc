// sgemm GFLOP/s on square matrices, one OpenBLAS thread (the per-worker peak
// that MFU is reported against).
#include <benchmark/benchmark.h>

#include <vector>

#include "worker/model/gemm.h"

static void BM_Sgemm(benchmark::State& state) {
  shardline::SetBlasThreads(1);
  const int n = static_cast<int>(state.range(0));
  std::vector<float> a(static_cast<size_t>(n) * n, 0.5f), b(a.size(), 0.25f), c(a.size());
  for (auto _ : state) {
    shardline::Sgemm(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["GFLOPs"] = benchmark::Counter(2.0 * n * n * n, benchmark::Counter::kIsIterationInvariantRate,
                                                benchmark::Counter::OneK::kIs1000);
}
BENCHMARK(BM_Sgemm)->Arg(256)->Arg(1024)->Arg(2048)->Unit(benchmark::kMillisecond)->UseRealTime();

BENCHMARK_MAIN();
