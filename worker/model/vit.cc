#include "worker/model/vit.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "worker/model/init.h"
#include "worker/model/softmax_xent.h"
#include "worker/model/transformer_ops.h"

namespace shardline {

absl::StatusOr<std::unique_ptr<Model>> Vit::Create(const VitSpec& spec) {
  for (const auto& [field, v] : {std::pair<const char*, int>{"patch", spec.patch}, {"layers", spec.layers},
                                 {"d_model", spec.d_model}, {"heads", spec.heads}, {"mlp_ratio", spec.mlp_ratio}}) {
    if (v <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("config field model.vit.", field, ": must be positive, got ", v));
    }
  }
  if (spec.d_model % spec.heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("config field model.vit.heads: ", spec.heads, " does not divide d_model ", spec.d_model));
  }
  if (spec.input.is_sequence() || spec.input.height <= 0 || spec.input.width <= 0) {
    return absl::InvalidArgumentError("config field model.vit: reads images, not text (data.text)");
  }
  if (spec.input.height % spec.patch != 0 || spec.input.width % spec.patch != 0) {
    return absl::InvalidArgumentError(absl::StrCat("config field model.vit.patch: ", spec.patch,
                                                   " does not divide the images' ", spec.input.height, "x",
                                                   spec.input.width));
  }
  return std::unique_ptr<Model>(new Vit(spec));
}

Vit::Vit(const VitSpec& spec) : spec_(spec) {
  shape_ = BlockShape{spec.d_model, spec.heads, spec.mlp_ratio * spec.d_model, /*causal=*/false};
  grid_ = (spec.input.height / spec.patch) * (spec.input.width / spec.patch);
  patch_dim_ = spec.input.channels * spec.patch * spec.patch;
  tokens_ = grid_ + (spec.class_token ? 1 : 0);
  const int64_t d = spec.d_model;
  embed_w_ = layout_.Add("patch_embed.proj.weight", {d, patch_dim_});
  embed_b_ = layout_.Add("patch_embed.proj.bias", {d});
  if (spec.class_token) cls_ = layout_.Add("cls_token", {1, d});
  pos_ = layout_.Add("pos_embed", {tokens_, d});
  for (int l = 0; l < spec.layers; ++l) blocks_.push_back(AddBlock(&layout_, absl::StrCat("blocks.", l, "."), shape_));
  norm_w_ = layout_.Add("norm.weight", {d});
  norm_b_ = layout_.Add("norm.bias", {d});
  head_w_ = layout_.Add("head.weight", {spec.input.num_classes, d});
  head_b_ = layout_.Add("head.bias", {spec.input.num_classes});
}

int64_t Vit::TrainFlopsPerExample() const {
  const int64_t d = spec_.d_model, f = shape_.hidden, t = tokens_;
  const int64_t per_layer = t * (2 * (4 * d * d + 2 * d * f) + 4 * t * d);
  return 3 * (2 * int64_t{grid_} * patch_dim_ * d + spec_.layers * per_layer + 2 * d * spec_.input.num_classes);
}

void Vit::InitRange(uint64_t seed, Range range, float* out) const {
  InitByTensor(layout_, seed, range, out, [&](const TensorInfo& t) { return Gpt2Init(t, spec_.layers); });
}

void Vit::Patchify(const float* x, float* patches) const {
  const int p = spec_.patch, h = spec_.input.height, w = spec_.input.width, c = spec_.input.channels;
  const int gw = w / p;
  for (int g = 0; g < grid_; ++g) {
    const int gy = g / gw, gx = g % gw;
    float* out = patches + static_cast<int64_t>(g) * patch_dim_;
    for (int ch = 0; ch < c; ++ch) {
      for (int py = 0; py < p; ++py) {
        const float* row = x + (static_cast<int64_t>(ch) * h + gy * p + py) * w + gx * p;
        std::memcpy(out + (ch * p + py) * p, row, sizeof(float) * p);
      }
    }
  }
}

std::vector<Range> Vit::Layers() const {
  std::vector<Range> out = {Range{layout_.tensor(embed_w_).offset, layout_.tensor(pos_).range().end}};
  for (const BlockTensors& b : blocks_) out.push_back(b.range);
  out.push_back(Range{layout_.tensor(norm_w_).offset, layout_.tensor(head_b_).range().end});
  return out;
}

std::vector<Range> Vit::GradientParts() const { return WithBlockParts(Layers(), layout_, blocks_); }

int64_t Vit::WorkspaceBytes(int batch) const {
  const int64_t n = batch, d = spec_.d_model, rows = n * tokens_, classes = spec_.input.num_classes;
  // patches [n grid, patch_dim]; d_embed [n grid, d]; stream, final_x, norm,
  // d_norm, dx [rows, d]; mean_f, rstd_f [rows]; pooled, d_pooled [n, d];
  // probs, d_logits [n, classes].
  const int64_t own = (n * grid_ * patch_dim_ + n * grid_ * d + 5 * rows * d + 2 * rows + 2 * n * d + 2 * n * classes) *
                      int64_t{sizeof(float)};
  const int count = static_cast<int>(blocks_.size());
  // The products: the blocks', and the embedding's and the head's on floats.
  ProductScratch products;
  if (count > 0) NoteBlockScratch(shape_, batch, tokens_, &products);
  NoteLinearScratch(batch * grid_, patch_dim_, spec_.d_model, /*float_input=*/true, &products);
  NoteLinearScratch(batch, spec_.d_model, spec_.input.num_classes, /*float_input=*/true, &products);
  return own + BlockStackBytes(shape_, batch, tokens_, count, spec_.remat, spec_.precision) +
         (count > 0 ? BlockScratchBytes(shape_, batch, tokens_) : 0) + products.bytes(spec_.precision);
}

BatchStats Vit::Forward(const float* params, const Examples& batch, ModelWorkspace* model_ws) const {
  auto* ws = static_cast<VitWorkspace*>(model_ws);
  const int n = batch.n, d = spec_.d_model, t = tokens_, classes = spec_.input.num_classes;
  const int rows = n * t;
  auto p = [&](int tensor) { return params + layout_.tensor(tensor).offset; };
  ws->BeforeForward(Range{layout_.tensor(embed_w_).offset, layout_.tensor(pos_).range().end});
  ws->patches.resize(static_cast<size_t>(n) * grid_ * patch_dim_);
  for (int b = 0; b < n; ++b) {
    Patchify(batch.x + static_cast<int64_t>(b) * spec_.input.features(),
             ws->patches.data() + static_cast<int64_t>(b) * grid_ * patch_dim_);
  }
  ws->d_embed.resize(static_cast<size_t>(n) * grid_ * d);  // the embeddings, before they join the stream
  LinearForward(&ws->products, Floats(ws->patches.data(), n * grid_, patch_dim_), p(embed_w_), p(embed_b_), d,
                ws->d_embed.data());
  ws->stream.resize(static_cast<size_t>(rows) * d);
  const int first = spec_.class_token ? 1 : 0;
  for (int b = 0; b < n; ++b) {
    float* seq = ws->stream.data() + static_cast<int64_t>(b) * t * d;
    if (spec_.class_token) std::memcpy(seq, p(cls_), sizeof(float) * d);
    std::memcpy(seq + static_cast<int64_t>(first) * d, ws->d_embed.data() + static_cast<int64_t>(b) * grid_ * d,
                sizeof(float) * grid_ * d);
    const float* pos = p(pos_);
    for (int64_t i = 0; i < static_cast<int64_t>(t) * d; ++i) seq[i] += pos[i];
  }
  ws->stack.remat = spec_.remat;
  ws->final_x.resize(ws->stream.size());
  for (size_t l = 0; l < blocks_.size(); ++l) {
    ws->BeforeForward(blocks_[l].range);
    float* out = l + 1 == blocks_.size() ? ws->final_x.data() : ws->stream.data();
    StackForward(BlockCall{params, layout_, blocks_[l], shape_, n, t, l, blocks_.size(), &ws->products},
                 ws->stream.data(), &ws->stack, out);
  }
  ws->BeforeForward(Range{layout_.tensor(norm_w_).offset, layout_.tensor(head_b_).range().end});
  ws->norm.resize(ws->stream.size());
  ws->mean_f.resize(static_cast<size_t>(rows));
  ws->rstd_f.resize(static_cast<size_t>(rows));
  LayerNormForward(ws->final_x.data(), p(norm_w_), p(norm_b_), rows, d, ws->norm.data(), ws->mean_f.data(),
                   ws->rstd_f.data());
  ws->pooled.assign(static_cast<size_t>(n) * d, 0.0f);
  for (int b = 0; b < n; ++b) {
    const float* seq = ws->norm.data() + static_cast<int64_t>(b) * t * d;
    float* out = ws->pooled.data() + static_cast<int64_t>(b) * d;
    if (spec_.class_token) {
      std::memcpy(out, seq, sizeof(float) * d);
      continue;
    }
    for (int r = 0; r < t; ++r) {
      for (int i = 0; i < d; ++i) out[i] += seq[static_cast<int64_t>(r) * d + i];
    }
    for (int i = 0; i < d; ++i) out[i] /= static_cast<float>(t);
  }
  ws->probs.resize(static_cast<size_t>(n) * classes);
  LinearForward(&ws->products, Floats(ws->pooled.data(), n, d), p(head_w_), p(head_b_), classes, ws->probs.data());
  return SoftmaxCrossEntropy(ws->probs.data(), batch.y, n, classes);
}

void Vit::Backward(const float* params, const Examples& batch, float grad_scale, bool accumulate, float* grads,
                   ModelWorkspace* model_ws) const {
  auto* ws = static_cast<VitWorkspace*>(model_ws);
  const int n = batch.n, d = spec_.d_model, t = tokens_, classes = spec_.input.num_classes;
  const int rows = n * t;
  auto p = [&](int tensor) { return params + layout_.tensor(tensor).offset; };
  auto g = [&](int tensor) { return grads + layout_.tensor(tensor).offset; };
  ws->BeforeBackward(Range{layout_.tensor(norm_w_).offset, layout_.tensor(head_b_).range().end});
  ws->BeforeGradient(Range{layout_.tensor(norm_w_).offset, layout_.tensor(head_b_).range().end});
  ws->d_logits.resize(ws->probs.size());
  SoftmaxCrossEntropyGrad(ws->probs.data(), batch.y, n, classes, grad_scale, ws->d_logits.data());
  ws->d_pooled.resize(static_cast<size_t>(n) * d);
  LinearBackward(&ws->products, ws->d_logits.data(), Floats(ws->pooled.data(), n, d), p(head_w_), classes, accumulate,
                 ws->d_pooled.data(), g(head_w_), g(head_b_));
  ws->d_norm.assign(static_cast<size_t>(rows) * d, 0.0f);
  for (int b = 0; b < n; ++b) {
    const float* dp = ws->d_pooled.data() + static_cast<int64_t>(b) * d;
    float* seq = ws->d_norm.data() + static_cast<int64_t>(b) * t * d;
    if (spec_.class_token) {
      std::memcpy(seq, dp, sizeof(float) * d);
      continue;
    }
    for (int r = 0; r < t; ++r) {
      for (int i = 0; i < d; ++i) seq[static_cast<int64_t>(r) * d + i] = dp[i] / static_cast<float>(t);
    }
  }
  ws->dx.resize(static_cast<size_t>(rows) * d);
  LayerNormBackward(ws->d_norm.data(), ws->final_x.data(), ws->mean_f.data(), ws->rstd_f.data(), p(norm_w_), rows, d,
                    accumulate, ws->dx.data(), g(norm_w_), g(norm_b_));
  ws->AfterBackward(Range{layout_.tensor(norm_w_).offset, layout_.tensor(head_b_).range().end});
  for (size_t l = blocks_.size(); l-- > 0;) {
    ws->BeforeBackward(blocks_[l].range);
    // The block announces its parts' gradients and their end itself.
    StackBackward(BlockCall{params, layout_, blocks_[l], shape_, n, t, l, blocks_.size(), &ws->products, ws},
                  accumulate, grads, &ws->scratch, &ws->stack, ws->dx.data());
  }
  // The embeddings' backward reads no parameters (no input gradient), so
  // it announces only the gradients it writes.
  ws->BeforeGradient(Range{layout_.tensor(embed_w_).offset, layout_.tensor(pos_).range().end});
  // The stream's input: class token, position embeddings, patch embeddings.
  float* dpos = g(pos_);
  if (!accumulate) std::fill(dpos, dpos + static_cast<int64_t>(t) * d, 0.0f);
  if (spec_.class_token && !accumulate) std::fill(g(cls_), g(cls_) + d, 0.0f);
  const int first = spec_.class_token ? 1 : 0;
  ws->d_embed.resize(static_cast<size_t>(n) * grid_ * d);
  for (int b = 0; b < n; ++b) {
    const float* seq = ws->dx.data() + static_cast<int64_t>(b) * t * d;
    for (int64_t i = 0; i < static_cast<int64_t>(t) * d; ++i) dpos[i] += seq[i];
    if (spec_.class_token) {
      for (int i = 0; i < d; ++i) g(cls_)[i] += seq[i];
    }
    std::memcpy(ws->d_embed.data() + static_cast<int64_t>(b) * grid_ * d, seq + static_cast<int64_t>(first) * d,
                sizeof(float) * grid_ * d);
  }
  LinearBackward(&ws->products, ws->d_embed.data(), Floats(ws->patches.data(), n * grid_, patch_dim_), p(embed_w_), d,
                 accumulate, nullptr, g(embed_w_), g(embed_b_));
  ws->AfterBackward(Range{layout_.tensor(embed_w_).offset, layout_.tensor(pos_).range().end});
}


}  // namespace shardline
