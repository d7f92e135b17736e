#include "worker/model/cnn.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "worker/model/gemm.h"
#include "worker/model/softmax_xent.h"

namespace shardline {
namespace {

template <typename T>
T* Grow(std::vector<T>* v, size_t n) {
  if (v->size() < n) v->resize(n);
  return v->data();
}

// out[i] = max(out[i] + bias[row], 0) over rows of `len` elements.
void AddBiasRelu(int rows, int64_t len, const float* bias, float* out) {
  for (int r = 0; r < rows; ++r) {
    float* row = out + r * len;
    const float b = bias[r];
    for (int64_t i = 0; i < len; ++i) row[i] = std::max(row[i] + b, 0.0f);
  }
}

// d[i] = 0 where the ReLU's output a[i] was 0.
void ReluMask(int64_t count, const float* a, float* d) {
  for (int64_t i = 0; i < count; ++i) d[i] = a[i] > 0.0f ? d[i] : 0.0f;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Cnn>> Cnn::Create(CnnSpec spec) {
  if (spec.input.channels <= 0 || spec.input.height <= 0 || spec.input.width <= 0 || spec.input.num_classes <= 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "model.cnn: the data set's examples are %dx%dx%d with %d classes; a CNN needs images",
        spec.input.channels, spec.input.height, spec.input.width, spec.input.num_classes));
  }
  if (spec.conv.empty()) return absl::InvalidArgumentError("config field model.cnn.conv: must list at least one layer");
  int h = spec.input.height, w = spec.input.width;
  for (size_t i = 0; i < spec.conv.size(); ++i) {
    const CnnSpec::Conv& c = spec.conv[i];
    if (c.channels <= 0 || c.kernel <= 0 || c.kernel % 2 == 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "config field model.cnn.conv[%d]: channels must be positive and kernel_size odd, got %d and %d", i,
          c.channels, c.kernel));
    }
    if (c.kernel > h || c.kernel > w) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "config field model.cnn.conv[%d].kernel_size: %d is larger than the layer's %dx%d input", i, c.kernel, h, w));
    }
    if (c.pool) {
      if (h % 2 != 0 || w % 2 != 0) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "config field model.cnn.conv[%d].pool: the layer's output is %dx%d; 2x2 pooling needs an even height "
            "and width (a %dx%d image)",
            i, h, w, spec.input.height, spec.input.width));
      }
      h /= 2;
      w /= 2;
    }
  }
  for (size_t i = 0; i < spec.dense_sizes.size(); ++i) {
    if (spec.dense_sizes[i] <= 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("config field model.cnn.dense_sizes[%d]: must be positive, got %d", i, spec.dense_sizes[i]));
    }
  }
  return std::unique_ptr<Cnn>(new Cnn(std::move(spec)));
}

Cnn::Cnn(CnnSpec spec) : spec_(std::move(spec)) {
  int c = spec_.input.channels, h = spec_.input.height, w = spec_.input.width;
  for (size_t i = 0; i < spec_.conv.size(); ++i) {
    const CnnSpec::Conv& s = spec_.conv[i];
    ConvLayer layer;
    layer.geometry = ConvGeometry{c, s.channels, s.kernel, h, w};
    layer.pool = s.pool;
    layer.weight = layout_.Add(absl::StrCat("conv", i, "/w"), {s.channels, c, s.kernel, s.kernel});
    layer.bias = layout_.Add(absl::StrCat("conv", i, "/b"), {s.channels});
    conv_.push_back(layer);
    c = s.channels;
    if (s.pool) {
      h /= 2;
      w /= 2;
    }
  }
  flat_channels_ = c;
  flat_height_ = h;
  flat_width_ = w;
  int in = c * h * w;
  std::vector<int> outs = spec_.dense_sizes;
  outs.push_back(spec_.input.num_classes);
  for (size_t j = 0; j < outs.size(); ++j) {
    DenseLayer layer;
    layer.in = in;
    layer.out = outs[j];
    layer.weight = layout_.Add(absl::StrCat("dense", j, "/w"), {outs[j], in});
    layer.bias = layout_.Add(absl::StrCat("dense", j, "/b"), {outs[j]});
    dense_.push_back(layer);
    in = outs[j];
  }
}

int64_t Cnn::TrainFlopsPerExample() const {
  int64_t flops = 0;
  for (size_t i = 0; i < conv_.size(); ++i) {
    const ConvGeometry& g = conv_[i].geometry;
    const int64_t mac = g.out_channels * g.col_rows() * g.pixels();
    flops += (i == 0 ? 4 : 6) * mac;
  }
  for (const DenseLayer& d : dense_) flops += 6 * static_cast<int64_t>(d.in) * d.out;
  return flops;
}

void Cnn::InitRange(uint64_t seed, Range range, float* out) const {
  layout_.ForEachOverlap(range, [&](int t, Range overlap) {
    const TensorInfo& info = layout_.tensor(t);
    float* dst = out + (overlap.begin - range.begin);
    if (info.shape.size() == 1) {
      std::fill(dst, dst + overlap.size(), 0.0f);
      return;
    }
    int64_t fan_in = 1;  // every dimension but the first (out)
    for (size_t d = 1; d < info.shape.size(); ++d) fan_in *= info.shape[d];
    HeUniform(seed, t, info.offset, fan_in, overlap, dst);
  });
}

BatchStats Cnn::Forward(const float* params, const float* x, const int32_t* y, int n,
                        ModelWorkspace* model_ws) const {
  auto* ws = static_cast<CnnWorkspace*>(model_ws);
  const size_t layers = conv_.size();
  ws->cols.resize(layers);
  ws->conv_out.resize(layers);
  ws->pooled.resize(layers);
  ws->argmax.resize(layers);
  // x is [n, C, H, W]; with one channel that is already [C, n, H, W].
  std::vector<float>& reordered = ws->dinput;  // free until backward
  const float* in = x;
  if (spec_.input.channels > 1) {
    const int64_t plane = static_cast<int64_t>(spec_.input.height) * spec_.input.width;
    float* dst = Grow(&reordered, static_cast<size_t>(n) * spec_.input.features());
    for (int c = 0; c < spec_.input.channels; ++c) {
      for (int b = 0; b < n; ++b) {
        std::memcpy(dst + (static_cast<int64_t>(c) * n + b) * plane,
                    x + (static_cast<int64_t>(b) * spec_.input.channels + c) * plane, sizeof(float) * plane);
      }
    }
    in = dst;
  }
  for (size_t l = 0; l < layers; ++l) {
    const ConvLayer& layer = conv_[l];
    const ConvGeometry& g = layer.geometry;
    const int64_t cols_n = n * g.pixels();
    float* cols = Grow(&ws->cols[l], static_cast<size_t>(g.col_rows() * cols_n));
    Im2Col(g, n, in, cols);
    float* out = Grow(&ws->conv_out[l], static_cast<size_t>(g.out_channels * cols_n));
    const float* weight = params + layout_.tensor(layer.weight).offset;
    Sgemm(false, false, g.out_channels, static_cast<int>(cols_n), static_cast<int>(g.col_rows()), 1.0f, weight,
          static_cast<int>(g.col_rows()), cols, static_cast<int>(cols_n), 0.0f, out, static_cast<int>(cols_n));
    AddBiasRelu(g.out_channels, cols_n, params + layout_.tensor(layer.bias).offset, out);
    in = out;
    if (layer.pool) {
      const int64_t planes = static_cast<int64_t>(g.out_channels) * n;
      const size_t pooled_size = static_cast<size_t>(planes * (g.height / 2) * (g.width / 2));
      float* pooled = Grow(&ws->pooled[l], pooled_size);
      MaxPool2x2(planes, g.height, g.width, out, pooled, Grow(&ws->argmax[l], pooled_size));
      in = pooled;
    }
  }
  // [C, n, h, w] -> [n, C*h*w], PyTorch's Flatten order.
  const int64_t plane = static_cast<int64_t>(flat_height_) * flat_width_;
  const int64_t features = flat_channels_ * plane;
  float* flat = Grow(&ws->flat, static_cast<size_t>(n * features));
  for (int c = 0; c < flat_channels_; ++c) {
    for (int b = 0; b < n; ++b) {
      std::memcpy(flat + b * features + c * plane, in + (static_cast<int64_t>(c) * n + b) * plane,
                  sizeof(float) * static_cast<size_t>(plane));
    }
  }
  ws->dense_out.resize(dense_.size());
  const float* act = flat;
  for (size_t j = 0; j < dense_.size(); ++j) {
    const DenseLayer& d = dense_[j];
    float* out = Grow(&ws->dense_out[j], static_cast<size_t>(n) * d.out);
    Sgemm(false, true, n, d.out, d.in, 1.0f, act, d.in, params + layout_.tensor(d.weight).offset, d.in, 0.0f, out,
          d.out);
    const float* bias = params + layout_.tensor(d.bias).offset;
    const bool hidden = j + 1 < dense_.size();
    for (int i = 0; i < n; ++i) {
      float* row = out + static_cast<int64_t>(i) * d.out;
      if (hidden) {
        for (int k = 0; k < d.out; ++k) row[k] = std::max(row[k] + bias[k], 0.0f);
      } else {
        for (int k = 0; k < d.out; ++k) row[k] += bias[k];
      }
    }
    act = out;
  }
  return SoftmaxCrossEntropy(ws->dense_out.back().data(), y, n, spec_.input.num_classes);
}

void Cnn::Backward(const float* params, const float* x, const int32_t* y, int n, float grad_scale,
                   bool accumulate, float* grads, ModelWorkspace* model_ws) const {
  (void)x;  // the first layer's input gradient is not needed; its im2col is kept
  auto* ws = static_cast<CnnWorkspace*>(model_ws);
  const float beta = accumulate ? 1.0f : 0.0f;
  int max_width = 0;
  for (const DenseLayer& d : dense_) max_width = std::max({max_width, d.in, d.out});
  float* delta = Grow(&ws->delta, static_cast<size_t>(n) * max_width);
  float* prev = Grow(&ws->delta_prev, static_cast<size_t>(n) * max_width);
  SoftmaxCrossEntropyGrad(ws->dense_out.back().data(), y, n, spec_.input.num_classes, grad_scale, delta);

  for (size_t j = dense_.size(); j-- > 0;) {
    const DenseLayer& d = dense_[j];
    const float* in = j == 0 ? ws->flat.data() : ws->dense_out[j - 1].data();
    float* gw = grads + layout_.tensor(d.weight).offset;
    float* gb = grads + layout_.tensor(d.bias).offset;
    // dW [out, in] = delta^T [out, n] * in [n, in]; db = column sums of delta.
    Sgemm(true, false, d.out, d.in, n, 1.0f, delta, d.out, in, d.in, beta, gw, d.in);
    if (!accumulate) std::fill(gb, gb + d.out, 0.0f);
    for (int i = 0; i < n; ++i) {
      const float* row = delta + static_cast<int64_t>(i) * d.out;
      for (int k = 0; k < d.out; ++k) gb[k] += row[k];
    }
    // d(in) [n, in] = delta [n, out] * W [out, in], through the ReLU that
    // made `in` (the conv stack applies its own mask below).
    Sgemm(false, false, n, d.in, d.out, 1.0f, delta, d.out, params + layout_.tensor(d.weight).offset, d.in, 0.0f,
          prev, d.in);
    if (j > 0) ReluMask(static_cast<int64_t>(n) * d.in, in, prev);
    std::swap(delta, prev);
  }

  // delta is d(flat) [n, C*h*w]: back to [C, n, h, w].
  const int64_t plane = static_cast<int64_t>(flat_height_) * flat_width_;
  const int64_t features = flat_channels_ * plane;
  float* dact = Grow(&ws->dinput, static_cast<size_t>(n * features));
  for (int c = 0; c < flat_channels_; ++c) {
    for (int b = 0; b < n; ++b) {
      std::memcpy(dact + (static_cast<int64_t>(c) * n + b) * plane, delta + b * features + c * plane,
                  sizeof(float) * static_cast<size_t>(plane));
    }
  }

  for (size_t l = conv_.size(); l-- > 0;) {
    const ConvLayer& layer = conv_[l];
    const ConvGeometry& g = layer.geometry;
    const int64_t cols_n = n * g.pixels();
    const int64_t out_size = g.out_channels * cols_n;
    float* dconv = Grow(&ws->dconv, static_cast<size_t>(out_size));
    // Through the pooling (if any) and the ReLU.
    if (layer.pool) {
      ReluMaxPool2x2Backward(static_cast<int64_t>(g.out_channels) * n, g.height, g.width, dact,
                             ws->pooled[l].data(), ws->argmax[l].data(), dconv);
    } else {
      const float* a = ws->conv_out[l].data();
      for (int64_t i = 0; i < out_size; ++i) dconv[i] = a[i] > 0.0f ? dact[i] : 0.0f;
    }
    const float* cols = ws->cols[l].data();
    const int k = static_cast<int>(g.col_rows());
    const int m = static_cast<int>(cols_n);
    // dW [O, C*k*k] = dconv [O, n*H*W] * cols^T; db = row sums of dconv.
    Sgemm(false, true, g.out_channels, k, m, 1.0f, dconv, m, cols, m, beta,
          grads + layout_.tensor(layer.weight).offset, k);
    RowSums(g.out_channels, cols_n, dconv, accumulate, grads + layout_.tensor(layer.bias).offset);
    if (l == 0) break;
    // d(cols) = W^T [C*k*k, O] * dconv [O, n*H*W]; Col2Im -> d(input).
    float* dcols = Grow(&ws->dcols, static_cast<size_t>(g.col_rows() * cols_n));
    Sgemm(true, false, k, m, g.out_channels, 1.0f, params + layout_.tensor(layer.weight).offset, k, dconv, m, 0.0f,
          dcols, m);
    const size_t in_size = static_cast<size_t>(g.in_channels * cols_n);
    dact = Grow(&ws->dinput, in_size);
    std::fill(dact, dact + in_size, 0.0f);
    Col2Im(g, n, dcols, dact);
  }
}

BatchStats Cnn::Evaluate(const float* params, const float* x, const int32_t* y, int n, ModelWorkspace* ws) const {
  BatchStats total;
  const int features = spec_.input.features();
  for (int begin = 0; begin < n; begin += kEvalChunk) {
    const int count = std::min(kEvalChunk, n - begin);
    const BatchStats s = Forward(params, x + static_cast<int64_t>(begin) * features, y + begin, count, ws);
    total.loss_sum += s.loss_sum;
    total.correct += s.correct;
    total.count += s.count;
  }
  return total;
}

}  // namespace shardline
