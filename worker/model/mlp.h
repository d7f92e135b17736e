// A multilayer perceptron over a flat parameter buffer: dense layers
// y = act(x W + b), softmax cross-entropy on the last. Weights are [in, out]
// row-major ("layer<i>/w"), biases [out] ("layer<i>/b"), in layer order.
//
//   Mlp mlp({784, {256, 128}, 10, config::RELU});
//   std::vector<float> params(mlp.layout().total_size()), grads(params.size());
//   mlp.InitRange(seed, {0, mlp.layout().total_size()}, params.data());
//   std::unique_ptr<ModelWorkspace> ws = mlp.NewWorkspace();
//   BatchStats s = mlp.ForwardBackward(params.data(), Images(x, y, n), 1.0f / n,
//                                      /*accumulate=*/false, grads.data(), ws.get());
//
// Configured as model.mlp (config.proto); one of the Model families.
#ifndef SHARDLINE_WORKER_MODEL_MLP_H_
#define SHARDLINE_WORKER_MODEL_MLP_H_

#include <cstdint>
#include <vector>

#include "common/job/shard.h"
#include "proto/config.pb.h"
#include "worker/model/flat_layout.h"
#include "worker/model/gemm.h"
#include "worker/model/model.h"

namespace shardline {

struct MlpSpec {
  int input_dim = 0;
  std::vector<int> hidden_sizes;
  int num_classes = 0;
  config::Activation activation = config::RELU;
  Precision precision = Precision::kFloat32;  // of the matrix products (config train.precision)
};

// Scratch buffers for one batch size; grown on demand, reused across calls.
// One per thread.
struct MlpWorkspace : ModelWorkspace {
  using ModelWorkspace::ModelWorkspace;
  std::vector<std::vector<float>> activations;  // per layer output, [n, width]
  std::vector<float> delta, delta_prev;          // [n, max width]
  int64_t OwnBytes() const override { return HeldBytes(activations, delta, delta_prev); }
};

class Mlp : public Model {
 public:
  explicit Mlp(MlpSpec spec);

  const MlpSpec& spec() const { return spec_; }
  const FlatLayout& layout() const override { return layout_; }
  const InputShape& input() const override { return input_; }
  int num_layers() const { return static_cast<int>(widths_.size()) - 1; }

  // Matmul FLOPs to train on one example: forward 2*in*out per layer, weight
  // gradient 2*in*out per layer, input gradient 2*in*out for every layer but
  // the first (the data needs no gradient).
  int64_t TrainFlopsPerExample() const override;

  // Weights He-uniform U(-sqrt(6/in), sqrt(6/in)), biases zero.
  void InitRange(uint64_t seed, Range range, float* out) const override;

  int64_t WorkspaceBytes(int batch) const override;
  std::vector<Range> Layers() const override {
    std::vector<Range> out;
    for (int l = 0; l < num_layers(); ++l) out.push_back(LayerRange(l));
    return out;
  }
  std::unique_ptr<ModelWorkspace> NewWorkspace() const override {
    return std::make_unique<MlpWorkspace>(spec_.precision);
  }

  // `ws` must be an MlpWorkspace.
  BatchStats Forward(const float* params, const Examples& batch, ModelWorkspace* ws) const override;
  void Backward(const float* params, const Examples& batch, float grad_scale, bool accumulate, float* grads,
                ModelWorkspace* ws) const override;

 private:
  // Layer l's weights and biases.
  Range LayerRange(int l) const;

  MlpSpec spec_;
  InputShape input_;
  std::vector<int> widths_;  // input_dim, hidden..., num_classes
  FlatLayout layout_;
};

}  // namespace shardline

#endif  // SHARDLINE_WORKER_MODEL_MLP_H_
