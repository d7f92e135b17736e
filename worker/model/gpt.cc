#include "worker/model/gpt.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "worker/model/init.h"
#include "worker/model/softmax_xent.h"
#include "worker/model/transformer_ops.h"

namespace shardline {

absl::StatusOr<std::unique_ptr<Model>> Gpt::Create(const GptSpec& spec) {
  auto positive = [](const char* field, int v) -> absl::Status {
    if (v > 0) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat("config field model.gpt.", field, ": must be positive, got ", v));
  };
  for (const auto& [field, v] : {std::pair<const char*, int>{"context", spec.context}, {"layers", spec.layers},
                                 {"d_model", spec.d_model}, {"heads", spec.heads}, {"mlp_ratio", spec.mlp_ratio}}) {
    if (absl::Status s = positive(field, v); !s.ok()) return s;
  }
  if (spec.d_model % spec.heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("config field model.gpt.heads: ", spec.heads, " does not divide d_model ", spec.d_model));
  }
  if (spec.vocab <= 0) return absl::InvalidArgumentError(absl::StrCat("a vocabulary of ", spec.vocab));
  return std::unique_ptr<Model>(new Gpt(spec));
}

Gpt::Gpt(const GptSpec& spec) : spec_(spec) {
  shape_ = BlockShape{spec.d_model, spec.heads, spec.mlp_ratio * spec.d_model, /*causal=*/true};
  input_.height = 1;
  input_.width = spec.context;
  input_.num_classes = spec.vocab;
  input_.sequence = spec.context;
  const int64_t d = spec.d_model;
  wte_ = layout_.Add("transformer.wte.weight", {spec.vocab, d});
  wpe_ = layout_.Add("transformer.wpe.weight", {spec.context, d});
  for (int l = 0; l < spec.layers; ++l) {
    blocks_.push_back(AddBlock(&layout_, absl::StrCat("transformer.h.", l, "."), shape_));
  }
  ln_f_w_ = layout_.Add("transformer.ln_f.weight", {d});
  ln_f_b_ = layout_.Add("transformer.ln_f.bias", {d});
}

int64_t Gpt::TrainFlopsPerExample() const {
  const int64_t d = spec_.d_model, f = shape_.hidden, t = spec_.context;
  const int64_t per_layer = 2 * (3 * d * d + d * d + 2 * d * f) + 4 * t * d;
  const int64_t per_position = spec_.layers * per_layer + 2 * d * spec_.vocab;
  return 3 * per_position * t;
}

void Gpt::InitRange(uint64_t seed, Range range, float* out) const {
  InitByTensor(layout_, seed, range, out, [&](const TensorInfo& t) { return Gpt2Init(t, spec_.layers); });
}

BatchStats Gpt::Forward(const float* params, const Examples& batch, ModelWorkspace* model_ws) const {
  auto* ws = static_cast<GptWorkspace*>(model_ws);
  const int n = batch.n, seq = spec_.context, d = spec_.d_model, vocab = spec_.vocab;
  const int rows = n * seq;
  ws->batch = n;
  ws->stack.remat = spec_.remat;
  ws->stream.resize(static_cast<size_t>(rows) * d);
  ws->final_x.resize(ws->stream.size());
  ws->BeforeForward(Embeddings());
  EmbeddingForward(batch.tokens, params + layout_.tensor(wte_).offset, params + layout_.tensor(wpe_).offset, n, seq,
                   d, ws->stream.data());
  for (size_t l = 0; l < blocks_.size(); ++l) {
    ws->BeforeForward(blocks_[l].range);
    float* out = l + 1 == blocks_.size() ? ws->final_x.data() : ws->stream.data();
    StackForward(BlockCall{params, layout_, blocks_[l], shape_, n, seq, l, blocks_.size(), &ws->products},
                 ws->stream.data(), &ws->stack, out);
  }
  if (blocks_.empty()) ws->final_x = ws->stream;
  ws->BeforeForward(FinalNorm());
  ws->ln_f.resize(ws->stream.size());
  ws->mean_f.resize(static_cast<size_t>(rows));
  ws->rstd_f.resize(static_cast<size_t>(rows));
  LayerNormForward(ws->final_x.data(), params + layout_.tensor(ln_f_w_).offset, params + layout_.tensor(ln_f_b_).offset,
                   rows, d, ws->ln_f.data(), ws->mean_f.data(), ws->rstd_f.data());
  ws->probs.resize(static_cast<size_t>(rows) * vocab);
  ws->BeforeForward(Embeddings());  // the head is tied to the token embedding
  LinearForward(&ws->products, Floats(ws->ln_f.data(), rows, d), params + layout_.tensor(wte_).offset, nullptr, vocab,
                ws->probs.data());
  if (ws->keep_logits) ws->logits = ws->probs;
  return SoftmaxCrossEntropy(ws->probs.data(), batch.y, rows, vocab);
}

int64_t Gpt::WorkspaceBytes(int batch) const {
  const int64_t rows = int64_t{batch} * spec_.context, d = spec_.d_model, vocab = spec_.vocab;
  // stream, final_x, ln_f, d_ln, dx [rows, d]; mean_f, rstd_f [rows];
  // probs, d_logits [rows, vocab].
  const int64_t own = (5 * rows * d + 2 * rows + 2 * rows * vocab) * int64_t{sizeof(float)};
  const int count = static_cast<int>(blocks_.size());
  // The products: the blocks', and the head's on ln_f as floats.
  ProductScratch products;
  if (count > 0) NoteBlockScratch(shape_, batch, spec_.context, &products);
  NoteLinearScratch(static_cast<int>(rows), spec_.d_model, spec_.vocab, /*float_input=*/true, &products);
  return own + BlockStackBytes(shape_, batch, spec_.context, count, spec_.remat, spec_.precision) +
         (count > 0 ? BlockScratchBytes(shape_, batch, spec_.context) : 0) + products.bytes(spec_.precision);
}

GptKvCache Gpt::NewKvCache() const {
  GptKvCache c{Products(spec_.precision)};
  c.blocks.resize(blocks_.size());
  for (BlockKvCache& b : c.blocks) b.Resize(shape_, spec_.context);
  c.x.resize(static_cast<size_t>(spec_.d_model));
  c.ln.resize(c.x.size());
  c.mean.resize(1);
  c.rstd.resize(1);
  c.logits.resize(static_cast<size_t>(spec_.vocab));
  return c;
}

void Gpt::ForwardCached(const float* params, int32_t token, int pos, GptKvCache* c) const {
  const int d = spec_.d_model;
  const float* e = params + layout_.tensor(wte_).offset + static_cast<int64_t>(token) * d;
  const float* w = params + layout_.tensor(wpe_).offset + static_cast<int64_t>(pos) * d;
  for (int i = 0; i < d; ++i) c->x[i] = e[i] + w[i];
  for (size_t l = 0; l < blocks_.size(); ++l) {
    BlockForwardCached(BlockCall{params, layout_, blocks_[l], shape_, 1, 1, 0, 1, &c->products}, pos, &c->blocks[l],
                       c->x.data());
  }
  LayerNormForward(c->x.data(), params + layout_.tensor(ln_f_w_).offset, params + layout_.tensor(ln_f_b_).offset, 1,
                   d, c->ln.data(), c->mean.data(), c->rstd.data());
  LinearForward(&c->products, Floats(c->ln.data(), 1, d), params + layout_.tensor(wte_).offset, nullptr, spec_.vocab,
                c->logits.data());
}

void Gpt::Backward(const float* params, const Examples& batch, float grad_scale, bool accumulate, float* grads,
                   ModelWorkspace* model_ws) const {
  auto* ws = static_cast<GptWorkspace*>(model_ws);
  const int n = batch.n, seq = spec_.context, d = spec_.d_model, vocab = spec_.vocab;
  const int rows = n * seq;
  ws->d_logits.resize(ws->probs.size());
  ws->d_ln.resize(static_cast<size_t>(rows) * d);
  ws->dx.resize(static_cast<size_t>(rows) * d);
  SoftmaxCrossEntropyGrad(ws->probs.data(), batch.y, rows, vocab, grad_scale, ws->d_logits.data());
  // The tied head: the first part of wte's gradient (the embedding adds the rest).
  ws->BeforeBackward(Embeddings());
  ws->BeforeGradient(Embeddings());
  float* dwte = grads + layout_.tensor(wte_).offset;
  LinearBackward(&ws->products, ws->d_logits.data(), Floats(ws->ln_f.data(), rows, d),
                 params + layout_.tensor(wte_).offset, vocab, accumulate, ws->d_ln.data(), dwte, nullptr);
  ws->BeforeBackward(FinalNorm());
  ws->BeforeGradient(FinalNorm());
  LayerNormBackward(ws->d_ln.data(), ws->final_x.data(), ws->mean_f.data(), ws->rstd_f.data(),
                    params + layout_.tensor(ln_f_w_).offset, rows, d, accumulate, ws->dx.data(),
                    grads + layout_.tensor(ln_f_w_).offset, grads + layout_.tensor(ln_f_b_).offset);
  ws->AfterBackward(FinalNorm());
  for (size_t l = blocks_.size(); l-- > 0;) {
    ws->BeforeBackward(blocks_[l].range);
    // The block announces its parts' gradients and their end itself.
    StackBackward(BlockCall{params, layout_, blocks_[l], shape_, n, seq, l, blocks_.size(), &ws->products, ws},
                  accumulate, grads, &ws->scratch, &ws->stack, ws->dx.data());
  }
  EmbeddingBackward(ws->dx.data(), batch.tokens, n, seq, d, accumulate, dwte, grads + layout_.tensor(wpe_).offset);
  ws->AfterBackward(Embeddings());
}


}  // namespace shardline
