// A convolutional network over a flat parameter buffer (model.cnn in
// config.proto): convolution layers (kxk, stride 1, same padding) each with
// ReLU and optional 2x2 max pooling, flattened channel-major, then dense
// layers with ReLU and a last dense layer to the classes, softmax
// cross-entropy. Convolutions are im2col + sgemm (conv.h).
//
// Tensors, in flat order, in PyTorch's layouts (so an exported checkpoint
// loads into the equivalent nn.Sequential; docs/models.md):
//   conv<i>/w [out, in, k, k]   conv<i>/b [out]
//   dense<j>/w [out, in]        dense<j>/b [out]
//
//   ASSIGN_OR_RETURN(std::unique_ptr<Cnn> cnn, Cnn::Create(spec));
#ifndef SHARDLINE_WORKER_MODEL_CNN_H_
#define SHARDLINE_WORKER_MODEL_CNN_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/model/conv.h"
#include "worker/model/pool.h"
#include "worker/model/flat_layout.h"
#include "worker/model/gemm.h"
#include "worker/model/model.h"

namespace shardline {

struct CnnSpec {
  struct Conv {
    int channels = 0;
    int kernel = 3;
    bool pool = true;
  };
  InputShape input;
  std::vector<Conv> conv;
  std::vector<int> dense_sizes;  // hidden dense widths
  Precision precision = Precision::kFloat32;  // of the matrix products (config train.precision)
};

// Scratch of one batch size, grown on demand.
struct CnnWorkspace : ModelWorkspace {
  using ModelWorkspace::ModelWorkspace;
  std::vector<float> input;                   // x as [C, n, H, W] when C > 1
  std::vector<std::vector<float>> padded;     // per conv layer, its input with zero borders [C, n, H+2p, W+2p]
  std::vector<float> cols;                    // one chunk's [C*k*k, chunk*H*W]
  std::vector<std::vector<float>> conv_out;   // per unpooled conv layer, after ReLU [O, n, H, W]
  std::vector<float> chunk_out;               // a pooled layer's GEMM output for one chunk [O, chunk*H*W]
  std::vector<std::vector<float>> pooled;     // per pooled conv layer [O, n, H/2, W/2]
  std::vector<std::vector<uint8_t>> argmax;   // per pooled conv layer
  std::vector<float> flat;                    // [n, features], the first dense layer's input
  std::vector<std::vector<float>> dense_out;  // per dense layer [n, width]; the last holds probabilities
  std::vector<float> delta, delta_prev;       // dense backward [n, max width]
  std::vector<float> dconv;                   // one chunk's d(conv output) [O, chunk*H*W]
  std::vector<float> dinput;                  // d(a conv layer's input) [C, n, H, W]
  std::vector<float> dpadded;                 // [C, n, H+2p, W+2p]
  std::vector<float> dcols;                   // one chunk's [C*k*k, chunk*H*W]
  int64_t OwnBytes() const override {
    return HeldBytes(input, padded, cols, conv_out, chunk_out, pooled, argmax, flat, dense_out, delta, delta_prev,
                     dconv, dinput, dpadded, dcols);
  }
};

class Cnn : public Model {
 public:
  // Fails (kInvalidArgument, naming the config field model.cnn...) when a
  // layer does not fit its input: a kernel larger than the image, or
  // pooling of an odd height or width.
  static absl::StatusOr<std::unique_ptr<Cnn>> Create(CnnSpec spec);

  const FlatLayout& layout() const override { return layout_; }
  const InputShape& input() const override { return spec_.input; }
  // Forward and weight gradient 2*O*C*k*k*H*W per conv layer, input gradient
  // the same for every conv layer but the first; 6*in*out per dense layer.
  int64_t TrainFlopsPerExample() const override;
  // Weights He-uniform over their fan-in (C*k*k or in), biases zero.
  void InitRange(uint64_t seed, Range range, float* out) const override;
  int64_t WorkspaceBytes(int batch) const override;
  std::vector<Range> Layers() const override;
  std::unique_ptr<ModelWorkspace> NewWorkspace() const override {
    return std::make_unique<CnnWorkspace>(spec_.precision);
  }
  // `ws` must be a CnnWorkspace.
  BatchStats Forward(const float* params, const Examples& batch, ModelWorkspace* ws) const override;
  void Backward(const float* params, const Examples& batch, float grad_scale, bool accumulate, float* grads,
                ModelWorkspace* ws) const override;
  // Evaluation in pieces of at most kEvalChunk examples, so memory does not grow with n.
  int eval_chunk() const override { return kEvalChunk; }
  static constexpr int kEvalChunk = 256;

 private:
  explicit Cnn(CnnSpec spec);

  // Forward's stages: the input as [C, n, H, W]; conv layer l (returns its
  // output, pooled if the layer pools); [C, n, h, w] -> [n, C*h*w]; the
  // dense layers into ws->dense_out.
  // What the products hold (ProductScratch) after a forward and backward.
  int64_t ProductBytes(int batch) const;
  const float* ChannelsFirst(const float* x, int n, CnnWorkspace* ws) const;
  const float* ConvForward(size_t l, const float* params, int n, const float* in, CnnWorkspace* ws) const;
  const float* Flatten(const float* in, int n, CnnWorkspace* ws) const;
  void DenseForward(const float* params, int n, const float* flat, CnnWorkspace* ws) const;
  // Backward's stages, in reverse: the dense layers (returns d(flat)); back
  // to [C, n, h, w]; conv layer l (returns d(its input), null for the first).
  float* DenseBackward(const float* params, const Examples& batch, float grad_scale, bool accumulate, float* grads,
                       CnnWorkspace* ws) const;
  float* Unflatten(const float* delta, int n, CnnWorkspace* ws) const;
  float* ConvBackward(size_t l, const float* params, int n, bool accumulate, const float* dact, float* grads,
                      CnnWorkspace* ws) const;

  // A layer's weights and biases (tensor indices), as one flat range.
  Range LayerRange(int weight, int bias) const {
    return Range{layout_.tensor(weight).offset, layout_.tensor(bias).range().end};
  }

  // Shapes derived from the spec.
  struct ConvLayer {
    ConvGeometry geometry;
    bool pool = false;
    int weight = 0;  // tensor indices in layout_
    int bias = 0;
  };
  struct DenseLayer {
    int in = 0;
    int out = 0;
    int weight = 0;
    int bias = 0;
  };

  CnnSpec spec_;
  std::vector<ConvLayer> conv_;
  std::vector<DenseLayer> dense_;  // hidden ones, then the classifier
  int flat_channels_ = 0, flat_height_ = 0, flat_width_ = 0;
  FlatLayout layout_;
};

}  // namespace shardline

#endif  // SHARDLINE_WORKER_MODEL_CNN_H_
