// One MLP training step without data loading or collectives: forward,
// backward and an SGD update on the whole buffer. Args: batch, hidden width.
#include <benchmark/benchmark.h>

#include <vector>

#include "common/job/rng.h"
#include "worker/model/gemm.h"
#include "worker/model/mlp.h"
#include "worker/optim/optimizer.h"

namespace shardline {
namespace {

void BM_MlpStep(benchmark::State& state) {
  SetBlasThreads(1);
  const int batch = static_cast<int>(state.range(0));
  const int hidden = static_cast<int>(state.range(1));
  const int hidden2 = hidden == 256 ? 128 : hidden;  // W1 is 784-256-128-10
  const Mlp mlp({784, {hidden, hidden2}, 10, config::RELU});
  const int64_t total = mlp.layout().total_size();
  std::vector<float> params(static_cast<size_t>(total)), grads(params.size());
  mlp.InitRange(0, Range{0, total}, params.data());
  std::vector<float> x(static_cast<size_t>(batch) * 784);
  std::vector<int32_t> y(static_cast<size_t>(batch));
  RandomStream rng(1, Purpose::kDropout, 0, 0);
  for (size_t i = 0; i < x.size(); ++i) x[i] = rng.Uniform(i);
  for (int i = 0; i < batch; ++i) y[static_cast<size_t>(i)] = i % 10;
  config::OptimizerConfig oc;
  oc.mutable_sgd();
  auto opt = *Optimizer::Create(oc, mlp.layout(), {Range{0, total}});
  MlpWorkspace ws(mlp.spec().precision);
  int64_t t = 0;
  for (auto _ : state) {
    mlp.ForwardBackward(params.data(), Images(x.data(), y.data(), batch), 1.0f / batch, false,
                        grads.data(), &ws);
    opt->Update(UpdateStep{++t, 1e-4f, 1.0f}, params.data(), grads.data(), /*want_update_sq=*/false);
  }
  state.counters["samples_per_second"] =
      benchmark::Counter(batch, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GFLOPs"] = benchmark::Counter(
      static_cast<double>(mlp.TrainFlopsPerExample()) * batch,
      benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::OneK::kIs1000);
}
BENCHMARK(BM_MlpStep)->Args({128, 256})->Args({256, 2048})->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace shardline

BENCHMARK_MAIN();
