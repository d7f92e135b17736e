// Matrix-product GFLOP/s on one thread: OpenBLAS's sgemm (the float32 peak
// MFU is reported against), oneDNN's bfloat16 matmul through Products (the
// operands rounded at each product, as a model's products given floats),
// on square matrices and on the transformer's shapes with each operand
// transposed as the backward uses them. On a CPU without bfloat16 products
// the bfloat16 rows are skipped, saying why.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "worker/model/gemm.h"
#include "worker/model/products.h"

namespace {

void Run(benchmark::State& state, shardline::Precision p, bool ta, bool tb, int m, int n, int k) {
  if (const absl::Status s = shardline::CheckPrecisionSupported(p); !s.ok()) {
    state.SkipWithError(std::string(s.message()).c_str());
    return;
  }
  shardline::SetBlasThreads(1);
  std::vector<float> a(static_cast<size_t>(m) * k, 0.5f), b(static_cast<size_t>(k) * n, 0.25f),
      c(static_cast<size_t>(m) * n);
  shardline::Products products(p);
  const shardline::Matrix ma = shardline::Floats(a.data(), ta ? k : m, ta ? m : k);
  const shardline::Matrix mb = shardline::Floats(b.data(), tb ? n : k, tb ? k : n);
  for (auto _ : state) {
    products.Multiply(ta, tb, 1.0f, ma, mb, 0.0f, c.data(), n);
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["GFLOPs"] = benchmark::Counter(2.0 * m * n * k, benchmark::Counter::kIsIterationInvariantRate,
                                                benchmark::Counter::OneK::kIs1000);
  if (p == shardline::Precision::kBfloat16) {
    state.SetLabel(shardline::ProcessBf16Kernel() == shardline::Bf16Kernel::kOneDnn
                       ? shardline::BfloatGemmImpl(ta, tb, m, n, k)
                       : shardline::Bf16KernelName(shardline::ProcessBf16Kernel()));
  }
}

void BM_Sgemm(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  Run(state, shardline::Precision::kFloat32, false, false, n, n, n);
}
void BM_BfloatGemm(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  Run(state, shardline::Precision::kBfloat16, false, false, n, n, n);
}
// oneDNN's float32 matmul on the same product: what OpenBLAS's sgemm is
// compared with (issue 47); no job runs it.
void BM_DnnlFloatGemm(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  std::vector<float> a(static_cast<size_t>(n) * n, 0.5f), b(a.size(), 0.25f), c(a.size());
  for (auto _ : state) {
    shardline::DnnlFloatGemm(n, n, n, a.data(), b.data(), c.data());
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["GFLOPs"] = benchmark::Counter(2.0 * n * n * n, benchmark::Counter::kIsIterationInvariantRate,
                                                benchmark::Counter::OneK::kIs1000);
}
// (precision, trans_a, trans_b, m, n, k): the GPT's linear layers at 4096
// rows and d 512 (forward x W^T, dx = dy W, dW = dy^T x) and an attention
// block (32 queries x 256 keys x 64).
void BM_Shape(benchmark::State& state) {
  Run(state, static_cast<shardline::Precision>(state.range(0)), state.range(1) != 0, state.range(2) != 0,
      static_cast<int>(state.range(3)), static_cast<int>(state.range(4)), static_cast<int>(state.range(5)));
}

}  // namespace

BENCHMARK(BM_Sgemm)->Arg(256)->Arg(1024)->Arg(2048)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_BfloatGemm)->Arg(256)->Arg(1024)->Arg(2048)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_DnnlFloatGemm)->Arg(256)->Arg(1024)->Arg(2048)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Shape)
    ->ArgsProduct({{0, 1}, {0}, {1}, {4096}, {512}, {512}})
    ->Args({0, 0, 0, 4096, 512, 512})
    ->Args({1, 0, 0, 4096, 512, 512})
    ->Args({0, 1, 0, 512, 512, 4096})
    ->Args({1, 1, 0, 512, 512, 4096})
    ->Args({0, 0, 1, 32, 256, 64})
    ->Args({1, 0, 1, 32, 256, 64})
    ->Args({0, 1, 0, 256, 64, 32})
    ->Args({1, 1, 0, 256, 64, 32})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

BENCHMARK_MAIN();
