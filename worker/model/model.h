// What the train step, the evaluator and the FLOP/MFU accounting know of a
// model: a flat parameter layout, initialisation of any range of it, forward
// and backward into a flat gradient, and the matmul FLOPs of one example.
// Nothing outside worker/model assumes a model family; CreateModel
// (model_factory.h) picks one from the config.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<Model> model, CreateModel(cfg.model(), InputOf(data.train)));
//   std::unique_ptr<ModelWorkspace> ws = model->NewWorkspace();
//   BatchStats s = model->Forward(params, Images(x, y, n), ws.get());
//   model->Backward(params, Images(x, y, n), 1.0f / n, /*accumulate=*/false, grads, ws.get());
#ifndef SHARDLINE_WORKER_MODEL_MODEL_H_
#define SHARDLINE_WORKER_MODEL_MODEL_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <type_traits>
#include <vector>

#include "common/job/shard.h"
#include "worker/model/flat_layout.h"
#include "worker/model/products.h"

namespace shardline {

// Sums over a batch's predicted targets (one per image, one per token);
// divide by count for means.
struct BatchStats {
  double loss_sum = 0;  // sum of per-target cross-entropy (nats)
  int64_t correct = 0;  // targets whose argmax logit is the target
  int64_t count = 0;    // targets predicted
};

// One example's input and targets. An image: channels x height x width
// floats, channel-major (a flat vector of height * width for one channel),
// and one class. A sequence (sequence > 0): that many token ids in
// [0, num_classes), and as many targets (the next token of each position).
struct InputShape {
  int channels = 1;
  int height = 0;
  int width = 0;
  int num_classes = 0;  // classes, or the vocabulary of a sequence
  int sequence = 0;     // tokens per example; 0: an image
  int features() const { return channels * height * width; }
  bool is_sequence() const { return sequence > 0; }
  // Targets per example: what BatchStats counts and losses are averaged over.
  int targets() const { return is_sequence() ? sequence : 1; }
};

// n examples as a model reads them: images as features x ([n, features()]
// floats) or sequences as tokens ([n, sequence] ids), and targets y
// ([n, targets()] ids). Views; the caller owns the memory.
struct Examples {
  int n = 0;
  const float* x = nullptr;
  const int32_t* tokens = nullptr;
  const int32_t* y = nullptr;
};

// n images x with classes y.
inline Examples Images(const float* x, const int32_t* y, int n) { return Examples{n, x, nullptr, y}; }
// n sequences of tokens with targets y.
inline Examples Sequences(const int32_t* tokens, const int32_t* y, int n) { return Examples{n, nullptr, tokens, y}; }

// What lets a caller overlap communication with a pass over the layers, and
// hold only some layers' parameters at a time (the train step's bucketed
// collectives and ZeRO-3: docs/collectives.md, "Overlap" and "Stage 3"). A
// layer is a range of whole tensors of the flat layout (its weights and
// biases); every tensor is in exactly one.
//
// - before_forward(layer): Forward calls it before it reads that layer's
//   parameters, the layers in forward order. A layer read again later in
//   the same Forward (a tied weight: the GPT's head reads the token
//   embedding) is announced again before that read.
// - before_backward(layer): Backward calls it before it reads that layer's
//   parameters or writes any of its gradients, the layers in backward
//   order, with the same rule for a layer read again.
// - before_gradient(part): Backward calls it before it writes any
//   gradient of `part` (whole tensors of one layer, or the whole layer):
//   no gradient is written that was not announced so.
//   (ZeRO-3 maps memory under a bucket's gradients then: a transformer
//   block announces each of its linear layers in turn, so only the parts
//   being written are mapped, not the block's.)
// - after_backward(part): Backward calls it once the gradients of `part`
//   (whole tensors: a layer, or parts of one as each is done) are final
//   for the call: it will neither write them nor read their parameters
//   again (the caller may drop those parameters then). Every tensor once,
//   in descending order.
//
// Between two before_ calls a model reads the parameters of the layer
// announced last only, less the parts announced final: the caller may drop
// any other layer's (the hooks test in tests/worker/model holds every
// model to this). Any hook may be empty.
struct LayerHooks {
  std::function<void(Range)> before_forward;
  std::function<void(Range)> before_backward;
  std::function<void(Range)> before_gradient;
  std::function<void(Range)> after_backward;
};

// A model's scratch buffers: grown on demand, reused across calls, one per
// thread. Only the model that made it (NewWorkspace) may use it.
class ModelWorkspace {
 public:
  explicit ModelWorkspace(Precision precision) : products(precision) {}
  virtual ~ModelWorkspace() = default;

  // Every matrix product of the model's passes, in its precision, with
  // what they hold (products.h). A caller that runs several passes over
  // parameters that do not change may keep the weights' roundings
  // (KeepRoundedWeights on it).
  Products products;

  // Set by the caller for the calls it wants to hear of; null: none.
  const LayerHooks* hooks = nullptr;

  // For models: announce a layer to the hooks, if any.
  void BeforeForward(Range layer) const {
    if (hooks != nullptr && hooks->before_forward) hooks->before_forward(layer);
  }
  void BeforeBackward(Range layer) const {
    if (hooks != nullptr && hooks->before_backward) hooks->before_backward(layer);
  }
  void BeforeGradient(Range part) const {
    if (hooks != nullptr && hooks->before_gradient) hooks->before_gradient(part);
  }
  void AfterBackward(Range layer) const {
    if (hooks != nullptr && hooks->after_backward) hooks->after_backward(layer);
  }

  // Bytes its buffers hold now (capacity): the activations a forward keeps
  // for its backward and the scratch of both, the products' included (the
  // memory gauges). The kept weight roundings are not: products.weights().
  int64_t bytes() const { return OwnBytes() + products.scratch_bytes(); }

 protected:
  // Bytes of the model's own buffers.
  virtual int64_t OwnBytes() const { return 0; }
};

// Bytes held (capacity) by vectors, and vectors of vectors, of plain values.
template <typename T>
int64_t HeldBytes(const std::vector<T>& v) {
  if constexpr (std::is_arithmetic_v<T>) {
    return static_cast<int64_t>(v.capacity() * sizeof(T));
  } else {
    int64_t sum = 0;
    for (const auto& inner : v) sum += HeldBytes(inner);
    return sum;
  }
}
template <typename... V>
int64_t HeldBytes(const V&... v) {
  return (int64_t{0} + ... + HeldBytes(v));
}

class Model {
 public:
  virtual ~Model() = default;

  virtual const FlatLayout& layout() const = 0;
  virtual const InputShape& input() const = 0;

  // Matmul FLOPs to train on one example (forward, weight gradients and the
  // input gradients the backward pass needs): the numerator of MFU.
  virtual int64_t TrainFlopsPerExample() const = 0;

  // Writes the initial values of flat elements [range.begin, range.end) to
  // out[0 .. range.size()). A pure function of (seed, element), so any
  // worker can initialise exactly its own shard.
  virtual void InitRange(uint64_t seed, Range range, float* out) const = 0;

  virtual std::unique_ptr<ModelWorkspace> NewWorkspace() const = 0;

  // What a fresh NewWorkspace() holds (its bytes()) after Forward and
  // Backward on `batch` examples, the products' scratch included: the
  // activations term of the memory plan (worker/train/memory_plan.h),
  // computed from the shapes alone. Each model's test checks it equals the
  // workspace's bytes().
  virtual int64_t WorkspaceBytes(int batch) const = 0;

  // The layers Forward announces (LayerHooks), in forward order, each once:
  // what ZeRO-3 holds whole at a time (the memory plan's gathered buckets).
  virtual std::vector<Range> Layers() const = 0;
  // The parts Backward announces gradients of (before_gradient and
  // after_backward), in ascending order: the layers, or finer (a
  // transformer block's linear layers and norms). What ZeRO-3 holds of the
  // gradients whole at a time (the memory plan).
  virtual std::vector<Range> GradientParts() const { return Layers(); }
  // The layers Forward announces again after its last (a tied weight: the
  // GPT's head reads the token embedding), in order; Backward starts with
  // the same reads and writes their gradients first. None by default.
  virtual std::vector<Range> ReadAgainAfterLast() const { return {}; }
  // The layers Backward announces (before_backward), in order: by default
  // those read again after the last first (ReadAgainAfterLast), then the
  // others of Layers() downwards. A model whose backward reads no
  // parameter of a layer (the ViT's patch embedding) leaves it out. The
  // hooks test holds every model to it; the memory plan follows it.
  virtual std::vector<Range> BackwardReads() const {
    std::vector<Range> out = ReadAgainAfterLast();
    const std::vector<Range> layers = Layers();
    for (auto it = layers.rbegin(); it != layers.rend(); ++it) {
      if (std::find(out.begin(), out.end(), *it) == out.end()) out.push_back(*it);
    }
    return out;
  }

  // Forward on a batch of examples shaped as input() says (each target in
  // [0, num_classes)): loss and accuracy sums over its targets. Leaves in
  // `ws` what Backward needs.
  virtual BatchStats Forward(const float* params, const Examples& batch, ModelWorkspace* ws) const = 0;

  // After Forward with the same params and batch and an untouched ws:
  // writes grad_scale * d(sum of losses)/d(params) into grads (flat
  // layout); with accumulate, adds to what grads already holds.
  virtual void Backward(const float* params, const Examples& batch, float grad_scale, bool accumulate, float* grads,
                        ModelWorkspace* ws) const = 0;

  // Examples per forward in an evaluation at most, to bound its memory; 0:
  // any number.
  virtual int eval_chunk() const { return 0; }

  // Forward only, for evaluation, on any n: in forwards of at most
  // eval_chunk() examples, their sums added in order.
  BatchStats Evaluate(const float* params, const Examples& batch, ModelWorkspace* ws) const;

  BatchStats ForwardBackward(const float* params, const Examples& batch, float grad_scale, bool accumulate,
                             float* grads, ModelWorkspace* ws) const {
    const BatchStats stats = Forward(params, batch, ws);
    Backward(params, batch, grad_scale, accumulate, grads, ws);
    return stats;
  }
};

// model.Forward over `batch` in slices of at most `chunk` examples, their
// sums added in order: an Evaluate whose memory does not grow with n.
inline BatchStats ForwardInChunks(const Model& model, const float* params, const Examples& batch, int chunk,
                                  ModelWorkspace* ws) {
  const InputShape& in = model.input();
  BatchStats total;
  for (int begin = 0; begin < batch.n; begin += chunk) {
    Examples part;
    part.n = std::min(chunk, batch.n - begin);
    if (batch.x != nullptr) part.x = batch.x + static_cast<int64_t>(begin) * in.features();
    if (batch.tokens != nullptr) part.tokens = batch.tokens + static_cast<int64_t>(begin) * in.sequence;
    part.y = batch.y + static_cast<int64_t>(begin) * in.targets();
    const BatchStats s = model.Forward(params, part, ws);
    total.loss_sum += s.loss_sum;
    total.correct += s.correct;
    total.count += s.count;
  }
  return total;
}

inline BatchStats Model::Evaluate(const float* params, const Examples& batch, ModelWorkspace* ws) const {
  return eval_chunk() > 0 ? ForwardInChunks(*this, params, batch, eval_chunk(), ws) : Forward(params, batch, ws);
}

}  // namespace shardline

#endif  // SHARDLINE_WORKER_MODEL_MODEL_H_
