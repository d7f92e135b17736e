#include "worker/model/cnn.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "worker/model/gemm.h"
#include "worker/model/init.h"
#include "worker/model/grow.h"
#include "worker/model/softmax_xent.h"

namespace shardline {
namespace {

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
  InitHeUniform(layout_, seed, range, out, [](const TensorInfo& t) {  // [out, in, ...]: all dimensions but the first
    int64_t fan_in = 1;
    for (size_t d = 1; d < t.shape.size(); ++d) fan_in *= t.shape[d];
    return fan_in;
  });
}

const float* Cnn::ChannelsFirst(const float* x, int n, CnnWorkspace* ws) const {
  // x is [n, C, H, W]; with one channel that is already [C, n, H, W].
  if (spec_.input.channels == 1) return x;
  const int64_t plane = static_cast<int64_t>(spec_.input.height) * spec_.input.width;
  float* dst = Grow(&ws->input, static_cast<size_t>(n) * spec_.input.features());
  for (int c = 0; c < spec_.input.channels; ++c) {
    for (int b = 0; b < n; ++b) {
      std::memcpy(dst + (static_cast<int64_t>(c) * n + b) * plane,
                  x + (static_cast<int64_t>(b) * spec_.input.channels + c) * plane, sizeof(float) * plane);
    }
  }
  return dst;
}

const float* Cnn::ConvForward(size_t l, const float* params, int n, const float* in, CnnWorkspace* ws) const {
  const ConvLayer& layer = conv_[l];
  const ConvGeometry& g = layer.geometry;
  ws->BeforeForward(LayerRange(layer.weight, layer.bias));
  const int64_t out_n = n * g.pixels();
  const float* weight = params + layout_.tensor(layer.weight).offset;
  const float* bias = params + layout_.tensor(layer.bias).offset;
  const int k = static_cast<int>(g.col_rows());
  const int chunk = ConvChunk(g, n);
  float* cols = Grow(&ws->cols, static_cast<size_t>(g.col_rows() * chunk * g.pixels()));
  float* padded = Grow(&ws->padded[l], static_cast<size_t>(g.in_channels * n * g.padded_pixels()));
  PadImages(g, n, in, padded);  // kept: backward redoes im2col from it
  // A pooled layer pools each chunk's GEMM output while it is in cache,
  // then adds bias and ReLU to a quarter of the values: the same result,
  // as both are monotonic (max(relu(v + b)) = relu(max(v) + b)). Where a
  // whole window ends below zero the recorded winner may differ, but the
  // ReLU then passes no gradient through it. Backward needs only the
  // pooled values and winners, so the full-size output is never stored.
  // An unpooled layer's GEMM writes straight into its output.
  const int64_t quarter = g.pixels() / 4;  // pooled pixels per image
  float* out = layer.pool ? Grow(&ws->chunk_out, static_cast<size_t>(g.out_channels * chunk * g.pixels()))
                          : Grow(&ws->conv_out[l], static_cast<size_t>(g.out_channels * out_n));
  float* pooled = nullptr;
  uint8_t* argmax = nullptr;
  if (layer.pool) {
    const size_t pooled_size = static_cast<size_t>(g.out_channels * n * quarter);
    pooled = Grow(&ws->pooled[l], pooled_size);
    argmax = Grow(&ws->argmax[l], pooled_size);
  }
  for (int first = 0; first < n; first += chunk) {
    const int count = std::min(chunk, n - first);
    const int m = static_cast<int>(count * g.pixels());
    Im2Col(g, n, first, count, padded, cols);
    // out[:, chunk] = W [O, C*k*k] * cols.
    if (!layer.pool) {
      ws->products.Multiply(false, false, 1.0f, WeightOf(weight, g.out_channels, k), Floats(cols, k, m), 0.0f,
                            out + first * g.pixels(), static_cast<int>(out_n));
      continue;
    }
    ws->products.Multiply(false, false, 1.0f, WeightOf(weight, g.out_channels, k), Floats(cols, k, m), 0.0f, out, m);
    for (int o = 0; o < g.out_channels; ++o) {
      const int64_t at = (static_cast<int64_t>(o) * n + first) * quarter;
      MaxPool2x2(count, g.height, g.width, out + static_cast<int64_t>(o) * m, pooled + at, argmax + at);
    }
  }
  if (layer.pool) {
    AddBiasRelu(g.out_channels, n * quarter, bias, pooled);
    return pooled;
  }
  AddBiasRelu(g.out_channels, out_n, bias, out);
  return out;
}

const float* Cnn::Flatten(const float* in, int n, CnnWorkspace* ws) const {
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
  return flat;
}

void Cnn::DenseForward(const float* params, int n, const float* flat, CnnWorkspace* ws) const {
  ws->dense_out.resize(dense_.size());
  const float* act = flat;
  for (size_t j = 0; j < dense_.size(); ++j) {
    const DenseLayer& d = dense_[j];
    ws->BeforeForward(LayerRange(d.weight, d.bias));
    float* out = Grow(&ws->dense_out[j], static_cast<size_t>(n) * d.out);
    const Matrix w = WeightOf(params + layout_.tensor(d.weight).offset, d.out, d.in);
    ws->products.Multiply(false, true, 1.0f, Floats(act, n, d.in), w, 0.0f, out, d.out);
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
}

std::vector<Range> Cnn::Layers() const {
  std::vector<Range> out;
  for (const ConvLayer& c : conv_) out.push_back(LayerRange(c.weight, c.bias));
  for (const DenseLayer& d : dense_) out.push_back(LayerRange(d.weight, d.bias));
  return out;
}

int64_t Cnn::WorkspaceBytes(int batch) const {
  const int64_t n = batch;
  // Buffers one per layer add up; those the layers share (Grow) hold the
  // largest any layer asks for.
  int64_t floats = 0, bytes = 0;
  int64_t cols = 0, chunk_out = 0, dconv = 0, dcols = 0, dpadded = 0, dinput = 0;
  if (spec_.input.channels > 1) floats += n * spec_.input.features();  // input
  for (size_t l = 0; l < conv_.size(); ++l) {
    const ConvGeometry& g = conv_[l].geometry;
    const int64_t chunk = ConvChunk(g, batch);
    cols = std::max(cols, g.col_rows() * chunk * g.pixels());
    floats += g.in_channels * n * g.padded_pixels();  // padded[l]
    if (conv_[l].pool) {
      chunk_out = std::max(chunk_out, g.out_channels * chunk * g.pixels());
      const int64_t pooled = g.out_channels * n * (g.pixels() / 4);
      floats += pooled;                                   // pooled[l]
      bytes += pooled * static_cast<int64_t>(sizeof(uint8_t));  // argmax[l]
    } else {
      floats += g.out_channels * n * g.pixels();  // conv_out[l]
    }
    dconv = std::max(dconv, g.out_channels * chunk * g.pixels());
    if (l > 0) {
      dcols = std::max(dcols, g.col_rows() * chunk * g.pixels());
      dpadded = std::max(dpadded, g.in_channels * n * g.padded_pixels());
      dinput = std::max(dinput, g.in_channels * n * g.pixels());
    }
  }
  const int64_t features = int64_t{flat_channels_} * flat_height_ * flat_width_;
  floats += n * features;  // flat
  dinput = std::max(dinput, n * features);
  int64_t max_width = 0;
  for (const DenseLayer& d : dense_) {
    floats += n * d.out;  // dense_out[j]
    max_width = std::max<int64_t>({max_width, d.in, d.out});
  }
  floats += 2 * n * max_width + cols + chunk_out + dconv + dcols + dpadded + dinput;
  return floats * static_cast<int64_t>(sizeof(float)) + bytes + ProductBytes(batch);
}

int64_t Cnn::ProductBytes(int batch) const {
  // The products' operands given as floats, by slot (ConvForward,
  // DenseForward, DenseBackward, ConvBackward).
  const int64_t n = batch;
  ProductScratch products;
  for (size_t l = 0; l < conv_.size(); ++l) {
    const ConvGeometry& g = conv_[l].geometry;
    const int64_t m = ConvChunk(g, batch) * g.pixels();
    products.Note(Slot::kWeight, g.out_channels * g.col_rows());
    products.Note(Slot::kB, g.col_rows() * m);                   // cols
    products.Note(Slot::kA, g.out_channels * m);                 // dconv for dW
    if (l > 0) products.Note(Slot::kB, g.out_channels * m);      // dconv for d(cols)
    const int64_t w = g.out_channels * g.col_rows();
    products.NoteProduct(w, g.col_rows() * m);                           // forward
    products.NoteProduct(g.out_channels * m, g.col_rows() * m);          // dW
    if (l > 0) products.NoteProduct(w, g.out_channels * m);              // d(cols)
  }
  for (const DenseLayer& d : dense_) {
    const int64_t w = int64_t{d.out} * d.in;
    products.Note(Slot::kWeight, w);
    products.Note(Slot::kA, n * std::max(d.in, d.out));  // the input forward, delta backward
    products.Note(Slot::kB, n * d.in);                   // the input for dW
    products.NoteProduct(n * d.in, w);                   // forward
    products.NoteProduct(n * d.out, n * d.in);           // dW
    products.NoteProduct(n * d.out, w);                  // d(input)
  }
  return products.bytes(spec_.precision);
}

BatchStats Cnn::Forward(const float* params, const Examples& batch, ModelWorkspace* model_ws) const {
  const int n = batch.n;
  auto* ws = static_cast<CnnWorkspace*>(model_ws);
  const size_t layers = conv_.size();
  ws->padded.resize(layers);
  ws->conv_out.resize(layers);
  ws->pooled.resize(layers);
  ws->argmax.resize(layers);
  const float* in = ChannelsFirst(batch.x, n, ws);
  for (size_t l = 0; l < layers; ++l) in = ConvForward(l, params, n, in, ws);
  DenseForward(params, n, Flatten(in, n, ws), ws);
  return SoftmaxCrossEntropy(ws->dense_out.back().data(), batch.y, n, spec_.input.num_classes);
}

float* Cnn::DenseBackward(const float* params, const Examples& batch, float grad_scale, bool accumulate,
                          float* grads, CnnWorkspace* ws) const {
  const int n = batch.n;
  const float beta = accumulate ? 1.0f : 0.0f;
  int max_width = 0;
  for (const DenseLayer& d : dense_) max_width = std::max({max_width, d.in, d.out});
  float* delta = Grow(&ws->delta, static_cast<size_t>(n) * max_width);
  float* prev = Grow(&ws->delta_prev, static_cast<size_t>(n) * max_width);
  SoftmaxCrossEntropyGrad(ws->dense_out.back().data(), batch.y, n, spec_.input.num_classes, grad_scale, delta);
  for (size_t j = dense_.size(); j-- > 0;) {
    const DenseLayer& d = dense_[j];
    ws->BeforeBackward(LayerRange(d.weight, d.bias));
    ws->BeforeGradient(LayerRange(d.weight, d.bias));
    const float* in = j == 0 ? ws->flat.data() : ws->dense_out[j - 1].data();
    float* gw = grads + layout_.tensor(d.weight).offset;
    float* gb = grads + layout_.tensor(d.bias).offset;
    // dW [out, in] = delta^T [out, n] * in [n, in]; db = column sums of delta.
    ws->products.Multiply(true, false, 1.0f, Floats(delta, n, d.out), Floats(in, n, d.in), beta, gw, d.in);
    if (!accumulate) std::fill(gb, gb + d.out, 0.0f);
    for (int i = 0; i < n; ++i) {
      const float* row = delta + static_cast<int64_t>(i) * d.out;
      for (int k = 0; k < d.out; ++k) gb[k] += row[k];
    }
    // d(in) [n, in] = delta [n, out] * W [out, in], through the ReLU that
    // made `in` (the conv stack applies its own mask below): the layer's
    // last read of W, so it is announced final after.
    ws->products.Multiply(false, false, 1.0f, Floats(delta, n, d.out),
                          WeightOf(params + layout_.tensor(d.weight).offset, d.out, d.in), 0.0f, prev, d.in);
    ws->AfterBackward(LayerRange(d.weight, d.bias));
    if (j > 0) ReluMask(static_cast<int64_t>(n) * d.in, in, prev);
    std::swap(delta, prev);
  }
  return delta;
}

float* Cnn::Unflatten(const float* delta, int n, CnnWorkspace* ws) const {
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
  return dact;
}

float* Cnn::ConvBackward(size_t l, const float* params, int n, bool accumulate, const float* dact, float* grads,
                         CnnWorkspace* ws) const {
  const ConvLayer& layer = conv_[l];
  ws->BeforeBackward(LayerRange(layer.weight, layer.bias));
  ws->BeforeGradient(LayerRange(layer.weight, layer.bias));
  const ConvGeometry& g = layer.geometry;
  const int64_t out_n = n * g.pixels();
  const int64_t quarter = g.pixels() / 4;
  const float* weight = params + layout_.tensor(layer.weight).offset;
  float* gw = grads + layout_.tensor(layer.weight).offset;
  float* gb = grads + layout_.tensor(layer.bias).offset;
  const int k = static_cast<int>(g.col_rows());
  const int chunk = ConvChunk(g, n);
  float* cols = Grow(&ws->cols, static_cast<size_t>(g.col_rows() * chunk * g.pixels()));
  float* dconv = Grow(&ws->dconv, static_cast<size_t>(g.out_channels * chunk * g.pixels()));
  float* dcols = l > 0 ? Grow(&ws->dcols, static_cast<size_t>(g.col_rows() * chunk * g.pixels())) : nullptr;
  float* dpadded = nullptr;
  if (l > 0) {
    const size_t size = static_cast<size_t>(g.in_channels * n * g.padded_pixels());
    dpadded = Grow(&ws->dpadded, size);
    std::fill(dpadded, dpadded + size, 0.0f);
  }
  // Chunk by chunk (the forward's chunks), all in cache:
  //   dconv = d(output)[chunk] through the pooling and the ReLU
  //   db += row sums of dconv;  dW += dconv * cols^T (cols redone)
  //   d(cols) = W^T [C*k*k, O] * dconv;  Col2Im -> d(input)[chunk]
  // Every sum runs in this fixed order.
  for (int first = 0; first < n; first += chunk) {
    const int count = std::min(chunk, n - first);
    const int m = static_cast<int>(count * g.pixels());
    for (int o = 0; o < g.out_channels; ++o) {
      float* row = dconv + static_cast<int64_t>(o) * m;
      if (layer.pool) {
        const int64_t at = (static_cast<int64_t>(o) * n + first) * quarter;
        ReluMaxPool2x2Backward(count, g.height, g.width, dact + at, ws->pooled[l].data() + at,
                               ws->argmax[l].data() + at, row);
      } else {
        const int64_t at = static_cast<int64_t>(o) * out_n + first * g.pixels();
        const float* a = ws->conv_out[l].data() + at;
        const float* d = dact + at;
        for (int i = 0; i < m; ++i) row[i] = a[i] > 0.0f ? d[i] : 0.0f;
      }
    }
    const bool add = accumulate || first > 0;
    RowSums(g.out_channels, m, dconv, add, gb);
    Im2Col(g, n, first, count, ws->padded[l].data(), cols);
    ws->products.Multiply(false, true, 1.0f, Floats(dconv, g.out_channels, m), Floats(cols, k, m), add ? 1.0f : 0.0f,
                          gw, k);
    if (l == 0) continue;  // the data needs no gradient
    const Matrix w = WeightOf(weight, g.out_channels, k);
    ws->products.Multiply(true, false, 1.0f, w, Floats(dconv, g.out_channels, m), 0.0f, dcols, m);
    Col2Im(g, n, first, count, dcols, dpadded);
  }
  ws->AfterBackward(LayerRange(layer.weight, layer.bias));
  if (l == 0) return nullptr;
  float* below = Grow(&ws->dinput, static_cast<size_t>(g.in_channels * out_n));
  UnpadImages(g, n, dpadded, below);
  return below;
}

void Cnn::Backward(const float* params, const Examples& batch, float grad_scale, bool accumulate, float* grads,
                   ModelWorkspace* model_ws) const {
  // The first layer's input gradient is not needed; its padded copy is kept.
  auto* ws = static_cast<CnnWorkspace*>(model_ws);
  const float* dact = Unflatten(DenseBackward(params, batch, grad_scale, accumulate, grads, ws), batch.n, ws);
  for (size_t l = conv_.size(); l-- > 0;) dact = ConvBackward(l, params, batch.n, accumulate, dact, grads, ws);
}


}  // namespace shardline
