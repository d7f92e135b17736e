#include "worker/model/mlp.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "worker/model/gemm.h"
#include "worker/model/init.h"
#include "worker/model/grow.h"
#include "worker/model/softmax_xent.h"

namespace shardline {

Mlp::Mlp(MlpSpec spec) : spec_(std::move(spec)) {
  input_ = InputShape{1, 1, spec_.input_dim, spec_.num_classes};
  widths_.push_back(spec_.input_dim);
  for (int h : spec_.hidden_sizes) widths_.push_back(h);
  widths_.push_back(spec_.num_classes);
  for (int l = 0; l < num_layers(); ++l) {
    layout_.Add(absl::StrCat("layer", l, "/w"), {widths_[l], widths_[l + 1]});
    layout_.Add(absl::StrCat("layer", l, "/b"), {widths_[l + 1]});
  }
}

int64_t Mlp::TrainFlopsPerExample() const {
  int64_t flops = 0;
  for (int l = 0; l < num_layers(); ++l) {
    const int64_t mac = static_cast<int64_t>(widths_[l]) * widths_[l + 1];
    flops += (l == 0 ? 4 : 6) * mac;
  }
  return flops;
}

void Mlp::InitRange(uint64_t seed, Range range, float* out) const {
  InitHeUniform(layout_, seed, range, out, [](const TensorInfo& t) { return t.shape[0]; });  // [in, out]
}

int64_t Mlp::WorkspaceBytes(int batch) const {
  int64_t floats = 0;
  int max_width = 0;
  for (size_t l = 1; l < widths_.size(); ++l) {
    floats += int64_t{batch} * widths_[l];  // activations[l - 1]
    max_width = std::max(max_width, widths_[l]);
  }
  floats += 2 * int64_t{batch} * max_width;  // delta, delta_prev
  // The products' operands given as floats: each layer's input and delta.
  ProductScratch products;
  for (size_t l = 0; l + 1 < widths_.size(); ++l) {
    const int64_t fan_in = widths_[l], fan_out = widths_[l + 1];
    products.Note(Slot::kA, batch * fan_in);                   // forward, dW
    if (l > 0) products.Note(Slot::kA, batch * fan_out);       // d(input)
    products.Note(Slot::kB, batch * fan_out);                  // dW
    products.Note(Slot::kWeight, fan_in * fan_out);
    products.NoteProduct(batch * fan_in, fan_in * fan_out);  // forward
    products.NoteProduct(batch * fan_in, batch * fan_out);   // dW
    if (l > 0) products.NoteProduct(batch * fan_out, fan_in * fan_out);  // d(input)
  }
  return floats * static_cast<int64_t>(sizeof(float)) + products.bytes(spec_.precision);
}

Range Mlp::LayerRange(int l) const {
  return Range{layout_.tensor(2 * l).offset, layout_.tensor(2 * l + 1).range().end};
}

BatchStats Mlp::Forward(const float* params, const Examples& batch, ModelWorkspace* model_ws) const {
  const float* x = batch.x;
  const int32_t* y = batch.y;
  const int n = batch.n;
  auto* ws = static_cast<MlpWorkspace*>(model_ws);
  const int layers = num_layers();
  ws->activations.resize(static_cast<size_t>(layers));
  const float* in = x;
  for (int l = 0; l < layers; ++l) {
    const int fan_in = widths_[l], fan_out = widths_[l + 1];
    ws->BeforeForward(LayerRange(l));
    const float* w = params + layout_.tensor(2 * l).offset;
    const float* b = params + layout_.tensor(2 * l + 1).offset;
    std::vector<float>& out = ws->activations[static_cast<size_t>(l)];
    Grow(&out, static_cast<size_t>(n) * fan_out);
    ws->products.Multiply(false, false, 1.0f, Floats(in, n, fan_in), WeightOf(w, fan_in, fan_out), 0.0f, out.data(),
                          fan_out);
    const bool hidden = l + 1 < layers;
    for (int i = 0; i < n; ++i) {
      float* row = out.data() + static_cast<size_t>(i) * fan_out;
      if (!hidden) {
        for (int j = 0; j < fan_out; ++j) row[j] += b[j];
      } else if (spec_.activation == config::TANH) {
        for (int j = 0; j < fan_out; ++j) row[j] = std::tanh(row[j] + b[j]);
      } else {
        for (int j = 0; j < fan_out; ++j) row[j] = std::max(row[j] + b[j], 0.0f);
      }
    }
    in = out.data();
  }

  // Softmax cross-entropy, in place: logits become probabilities.
  return SoftmaxCrossEntropy(ws->activations.back().data(), y, n, spec_.num_classes);
}

void Mlp::Backward(const float* params, const Examples& batch, float grad_scale, bool accumulate, float* grads,
                   ModelWorkspace* model_ws) const {
  const float* x = batch.x;
  const int32_t* y = batch.y;
  const int n = batch.n;
  auto* ws = static_cast<MlpWorkspace*>(model_ws);
  const int layers = num_layers();
  const int max_width = *std::max_element(widths_.begin() + 1, widths_.end());
  Grow(&ws->delta, static_cast<size_t>(n) * max_width);
  Grow(&ws->delta_prev, static_cast<size_t>(n) * max_width);

  // d(loss)/d(logits) = softmax - onehot, times grad_scale.
  const int classes = spec_.num_classes;
  float* delta = ws->delta.data();
  SoftmaxCrossEntropyGrad(ws->activations.back().data(), y, n, classes, grad_scale, delta);

  const float beta = accumulate ? 1.0f : 0.0f;
  for (int l = layers - 1; l >= 0; --l) {
    ws->BeforeBackward(LayerRange(l));
    ws->BeforeGradient(LayerRange(l));
    const int fan_in = widths_[l], fan_out = widths_[l + 1];
    const float* in = l == 0 ? x : ws->activations[static_cast<size_t>(l - 1)].data();
    float* gw = grads + layout_.tensor(2 * l).offset;
    float* gb = grads + layout_.tensor(2 * l + 1).offset;
    // dW = in^T * delta; db = column sums of delta.
    ws->products.Multiply(true, false, 1.0f, Floats(in, n, fan_in), Floats(delta, n, fan_out), beta, gw, fan_out);
    if (!accumulate) std::fill(gb, gb + fan_out, 0.0f);
    for (int i = 0; i < n; ++i) {
      const float* d = delta + static_cast<size_t>(i) * fan_out;
      for (int j = 0; j < fan_out; ++j) gb[j] += d[j];
    }
    if (l == 0) {
      ws->AfterBackward(LayerRange(l));
      break;
    }
    // delta_prev = (delta * W^T) .* act'(in): the layer's last read of W,
    // so it is announced final after.
    const float* w = params + layout_.tensor(2 * l).offset;
    float* prev = ws->delta_prev.data();
    ws->products.Multiply(false, true, 1.0f, Floats(delta, n, fan_out), WeightOf(w, fan_in, fan_out), 0.0f, prev,
                          fan_in);
    ws->AfterBackward(LayerRange(l));
    const size_t count = static_cast<size_t>(n) * fan_in;
    if (spec_.activation == config::TANH) {
      for (size_t k = 0; k < count; ++k) prev[k] *= 1.0f - in[k] * in[k];
    } else {
      for (size_t k = 0; k < count; ++k) prev[k] = in[k] > 0.0f ? prev[k] : 0.0f;
    }
    std::swap(ws->delta, ws->delta_prev);
    delta = ws->delta.data();
  }
}

}  // namespace shardline
