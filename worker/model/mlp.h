// A multilayer perceptron over a flat parameter buffer: dense layers
// y = act(x W + b), softmax cross-entropy on the last. Weights are [in, out]
// row-major ("layer<i>/w"), biases [out] ("layer<i>/b"), in layer order.
//
//   Mlp mlp({784, {256, 128}, 10, config::RELU});
//   std::vector<float> params(mlp.layout().total_size()), grads(params.size());
//   mlp.InitRange(seed, {0, mlp.layout().total_size()}, params.data());
//   MlpWorkspace ws;
//   BatchStats s = mlp.ForwardBackward(params.data(), x, y, n, 1.0f / n,
//                                      /*accumulate=*/false, grads.data(), &ws);
#ifndef SHARDLINE_WORKER_MODEL_MLP_H_
#define SHARDLINE_WORKER_MODEL_MLP_H_

#include <cstdint>
#include <vector>

#include "common/shard.h"
#include "proto/config.pb.h"
#include "worker/model/flat_layout.h"

namespace shardline {

struct MlpSpec {
  int input_dim = 0;
  std::vector<int> hidden_sizes;
  int num_classes = 0;
  config::Activation activation = config::RELU;
};

// Sums over a batch; divide by count for means.
struct BatchStats {
  double loss_sum = 0;  // sum of per-example cross-entropy (nats)
  int64_t correct = 0;  // examples whose argmax logit is the label
  int64_t count = 0;
};

// Scratch buffers for one batch size; grown on demand, reused across calls.
// One per thread.
struct MlpWorkspace {
  std::vector<std::vector<float>> activations;  // per layer output, [n, width]
  std::vector<float> delta, delta_prev;          // [n, max width]
};

class Mlp {
 public:
  explicit Mlp(MlpSpec spec);

  const MlpSpec& spec() const { return spec_; }
  const FlatLayout& layout() const { return layout_; }
  int num_layers() const { return static_cast<int>(widths_.size()) - 1; }

  // Matmul FLOPs to train on one example: forward 2*in*out per layer, weight
  // gradient 2*in*out per layer, input gradient 2*in*out for every layer but
  // the first (the data needs no gradient).
  int64_t TrainFlopsPerExample() const;

  // Writes the initial values of flat elements [range.begin, range.end) to
  // out[0 .. range.size()). A pure function of (seed, element): weights are
  // He-uniform U(-sqrt(6/in), sqrt(6/in)), biases zero. So any worker can
  // initialise exactly its own shard.
  void InitRange(uint64_t seed, Range range, float* out) const;

  // Forward and backward on n examples x ([n, input_dim]) with labels y.
  // Writes grad_scale * d(sum of losses)/d(params) into grads (flat layout);
  // with accumulate, adds to what grads already holds.
  BatchStats ForwardBackward(const float* params, const float* x, const int32_t* y, int n,
                             float grad_scale, bool accumulate, float* grads,
                             MlpWorkspace* ws) const;

  // Forward only: loss and accuracy sums.
  BatchStats Evaluate(const float* params, const float* x, const int32_t* y, int n,
                      MlpWorkspace* ws) const;

  // ForwardBackward in its two halves, for callers that time them apart.
  // Forward runs the layers, leaving the activations and softmax
  // probabilities in `ws`, and returns the loss sums; Backward then needs
  // the same params, x, y, n and ws, untouched in between.
  BatchStats Forward(const float* params, const float* x, const int32_t* y, int n,
                     MlpWorkspace* ws) const;
  void Backward(const float* params, const float* x, const int32_t* y, int n, float grad_scale,
                bool accumulate, float* grads, MlpWorkspace* ws) const;

 private:

  MlpSpec spec_;
  std::vector<int> widths_;  // input_dim, hidden..., num_classes
  FlatLayout layout_;
};

}  // namespace shardline

#endif  // SHARDLINE_WORKER_MODEL_MLP_H_
