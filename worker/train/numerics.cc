#include "worker/train/numerics.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/job/rng.h"
#include "common/platform/status_macros.h"
#include "worker/model/gemm.h"
#include "worker/model/model_factory.h"
#include "worker/optim/optimizer.h"
#include "worker/train/run_sizes.h"

namespace shardline {
namespace {

// Fixed: the canary is the same on every host and in every job.
constexpr uint64_t kCanarySeed = 0x6e756d6572696373ull;  // "numerics"

// FNV-1a over bytes, 64 bits.
class Fnv {
 public:
  void Add(const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) {
      hash_ ^= p[i];
      hash_ *= 0x100000001b3ull;
    }
  }
  template <typename T>
  void AddValue(T v) {
    Add(&v, sizeof(v));
  }
  uint64_t hash() const { return hash_; }

 private:
  uint64_t hash_ = 0xcbf29ce484222325ull;
};

// The job's model at its shapes, a transformer cut to one block: each
// block runs the same kernels at the same shapes, so one covers them all
// in a fraction of the memory.
config::ModelConfig CanaryModel(const config::ModelConfig& model) {
  config::ModelConfig canary = model;
  if (canary.has_gpt()) canary.mutable_gpt()->set_layers(std::min(canary.gpt().layers(), 1));
  if (canary.has_vit()) canary.mutable_vit()->set_layers(std::min(canary.vit().layers(), 1));
  return canary;
}

// n fixed synthetic examples of `in`'s shape, held in x, tokens and y.
struct CanaryBatch {
  std::vector<float> x;
  std::vector<int32_t> tokens, y;
  Examples Make(const InputShape& in, int n) {
    const RandomStream draws(kCanarySeed, Purpose::kCanary, 0, 0);
    uint64_t at = 0;
    y.resize(static_cast<size_t>(n) * in.targets());
    for (int32_t& v : y) v = static_cast<int32_t>(draws.UniformInt(at++, static_cast<uint64_t>(in.num_classes)));
    if (in.is_sequence()) {
      tokens.resize(static_cast<size_t>(n) * in.sequence);
      for (int32_t& v : tokens) v = static_cast<int32_t>(draws.UniformInt(at++, static_cast<uint64_t>(in.num_classes)));
      return Sequences(tokens.data(), y.data(), n);
    }
    x.resize(static_cast<size_t>(n) * in.features());
    for (float& v : x) v = draws.Uniform(at++);
    return Images(x.data(), y.data(), n);
  }
};

}  // namespace

std::string KernelDescription(const config::JobConfig& config) {
  const int threads = config.runtime().blas_threads();
  const std::string products = config.train().precision() == config::BF16
                                   ? absl::StrCat("BF16 products (", Bf16KernelName(ProcessBf16Kernel()), ")")
                                   : "FP32 products";
  return absl::StrCat("OpenBLAS ", BlasCoreName(), " kernels; matrix-product ISA ", CpuMatmulIsa(), "; ", products,
                      "; ", threads, threads == 1 ? " BLAS thread" : " BLAS threads");
}

absl::StatusOr<NumericsFingerprint> ComputeNumerics(const config::JobConfig& config, const InputShape& input) {
  ASSIGN_OR_RETURN(std::unique_ptr<Model> model,
                   CreateModel(CanaryModel(config.model()), input, ModelOptionsOf(config.train())));
  const FlatLayout& layout = model->layout();
  const Range all{0, layout.total_size()};
  std::vector<float> params(static_cast<size_t>(all.size())), grads(params.size());
  model->InitRange(kCanarySeed, all, params.data());
  const int n = std::max(1, MicroBatchSize(config, std::max(1, config.runtime().num_workers())));
  CanaryBatch batch;
  const Examples examples = batch.Make(model->input(), n);
  const std::unique_ptr<ModelWorkspace> ws = model->NewWorkspace();
  const BatchStats stats =
      model->ForwardBackward(params.data(), examples, 1.0f / static_cast<float>(n * model->input().targets()),
                             /*accumulate=*/false, grads.data(), ws.get());
  ASSIGN_OR_RETURN(std::unique_ptr<Optimizer> optimizer, Optimizer::Create(config.optimizer(), layout, {all}));
  optimizer->Update(UpdateStep{1, 1e-3f, 1.0f}, params.data(), grads.data(), /*want_update_sq=*/false);
  Fnv h;
  h.AddValue(stats.loss_sum);
  h.AddValue(stats.correct);
  h.Add(grads.data(), grads.size() * sizeof(float));
  h.Add(params.data(), params.size() * sizeof(float));
  return NumericsFingerprint{h.hash(), KernelDescription(config)};
}

absl::StatusOr<NumericsFingerprint> NumericsMemo::Get(const config::JobConfig& config, const InputShape& input,
                                                     bool* computed) {
  const std::string key = absl::StrCat(config.SerializeAsString(), "|", input.channels, "x", input.height, "x",
                                       input.width, "|", input.num_classes, "|", input.sequence);
  *computed = !value_.has_value() || key != key_;
  if (*computed) {
    ASSIGN_OR_RETURN(NumericsFingerprint n, ComputeNumerics(config, input));
    key_ = key;
    value_ = std::move(n);
  }
  return *value_;
}

}  // namespace shardline
