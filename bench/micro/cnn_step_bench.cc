// The CNN of deploy/configs/fmnist_cnn.textproto without data loading or
// collectives: one forward + backward at batch 128, and its kernels alone
// at the shapes that step runs them (per chunk, as cnn.cc does), so a
// profile's shares can be checked one kernel at a time.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "common/job/rng.h"
#include "worker/model/cnn.h"
#include "worker/model/conv.h"
#include "worker/model/pool.h"
#include "worker/model/gemm.h"

namespace shardline {
namespace {

constexpr int kBatch = 128;

CnnSpec ShippedSpec() {
  CnnSpec spec;
  spec.input = InputShape{1, 28, 28, 10};
  spec.conv = {{32, 3, true}, {64, 3, true}};
  spec.dense_sizes = {128};
  return spec;
}

std::vector<float> Random(size_t n, uint64_t seed) {
  std::vector<float> v(n);
  RandomStream rng(seed, Purpose::kDropout, 0, 0);
  for (size_t i = 0; i < n; ++i) v[i] = rng.Uniform(i) - 0.5f;
  return v;
}

void BM_CnnStep(benchmark::State& state) {
  SetBlasThreads(1);
  auto cnn = *Cnn::Create(ShippedSpec());
  const int64_t total = cnn->layout().total_size();
  std::vector<float> params(static_cast<size_t>(total)), grads(params.size());
  cnn->InitRange(0, Range{0, total}, params.data());
  std::vector<float> x = Random(static_cast<size_t>(kBatch) * 784, 1);
  std::vector<int32_t> y(kBatch);
  for (int i = 0; i < kBatch; ++i) y[static_cast<size_t>(i)] = i % 10;
  auto ws = cnn->NewWorkspace();
  for (auto _ : state) {
    cnn->Forward(params.data(), Images(x.data(), y.data(), kBatch), ws.get());
    cnn->Backward(params.data(), Images(x.data(), y.data(), kBatch), 1.0f / kBatch, false, grads.data(), ws.get());
  }
  state.counters["samples_per_second"] =
      benchmark::Counter(kBatch, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GFLOPs"] = benchmark::Counter(static_cast<double>(cnn->TrainFlopsPerExample()) * kBatch,
                                                benchmark::Counter::kIsIterationInvariantRate,
                                                benchmark::Counter::OneK::kIs1000);
}
BENCHMARK(BM_CnnStep)->Unit(benchmark::kMillisecond)->UseRealTime();

// Layer 0 (1 -> 32 channels at 28x28) or layer 1 (32 -> 64 at 14x14).
ConvGeometry Layer(int64_t l) { return l == 0 ? ConvGeometry{1, 32, 3, 28, 28} : ConvGeometry{32, 64, 3, 14, 14}; }

// Every chunk of the batch, as Forward and Backward visit them.
template <typename F>
void ForChunks(const ConvGeometry& g, F f) {
  const int chunk = ConvChunk(g, kBatch);
  for (int first = 0; first < kBatch; first += chunk) f(first, std::min(chunk, kBatch - first));
}

void BM_Im2Col(benchmark::State& state) {
  const ConvGeometry g = Layer(state.range(0));
  std::vector<float> padded = Random(static_cast<size_t>(g.in_channels * kBatch * g.padded_pixels()), 2);
  std::vector<float> cols(static_cast<size_t>(g.col_rows() * ConvChunk(g, kBatch) * g.pixels()));
  for (auto _ : state) {
    ForChunks(g, [&](int first, int count) { Im2Col(g, kBatch, first, count, padded.data(), cols.data()); });
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_Im2Col)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_ConvGemmForward(benchmark::State& state) {
  SetBlasThreads(1);
  const ConvGeometry g = Layer(state.range(0));
  const int chunk = ConvChunk(g, kBatch);
  const int k = static_cast<int>(g.col_rows());
  std::vector<float> w = Random(static_cast<size_t>(g.out_channels * k), 3);
  std::vector<float> cols = Random(static_cast<size_t>(k * chunk * g.pixels()), 4);
  std::vector<float> out(static_cast<size_t>(g.out_channels * chunk * g.pixels()));
  for (auto _ : state) {
    ForChunks(g, [&](int, int count) {
      const int m = static_cast<int>(count * g.pixels());
      Sgemm(false, false, g.out_channels, m, k, 1.0f, w.data(), k, cols.data(), m, 0.0f, out.data(), m);
    });
  }
}
BENCHMARK(BM_ConvGemmForward)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_MaxPool(benchmark::State& state) {
  const ConvGeometry g = Layer(state.range(0));
  const int64_t planes = static_cast<int64_t>(g.out_channels) * kBatch;
  std::vector<float> in = Random(static_cast<size_t>(planes * g.pixels()), 5);
  std::vector<float> out(static_cast<size_t>(planes * g.pixels() / 4));
  std::vector<uint8_t> argmax(out.size());
  for (auto _ : state) {
    MaxPool2x2(planes, g.height, g.width, in.data(), out.data(), argmax.data());
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_MaxPool)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_PoolBackward(benchmark::State& state) {
  const ConvGeometry g = Layer(state.range(0));
  const int64_t planes = static_cast<int64_t>(g.out_channels) * kBatch;
  std::vector<float> in = Random(static_cast<size_t>(planes * g.pixels()), 6);
  std::vector<float> pooled(static_cast<size_t>(planes * g.pixels() / 4));
  std::vector<uint8_t> argmax(pooled.size());
  MaxPool2x2(planes, g.height, g.width, in.data(), pooled.data(), argmax.data());
  std::vector<float> dout = Random(pooled.size(), 7);
  std::vector<float> din(in.size());
  for (auto _ : state) {
    ReluMaxPool2x2Backward(planes, g.height, g.width, dout.data(), pooled.data(), argmax.data(), din.data());
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_PoolBackward)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace
}  // namespace shardline

BENCHMARK_MAIN();
