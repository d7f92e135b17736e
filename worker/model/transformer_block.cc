#include "worker/model/transformer_block.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/match.h"

#include "worker/model/model.h"
#include "worker/model/transformer_ops.h"

namespace shardline {

TensorInit Gpt2Init(const TensorInfo& t, int layers) {
  if (t.shape.size() == 2) {
    const bool residual = absl::EndsWith(t.name, "c_proj.weight");
    return TensorInit{TensorInit::kNormal, residual ? 0.02f / std::sqrt(2.0f * static_cast<float>(layers)) : 0.02f};
  }
  const bool gain = absl::EndsWith(t.name, ".weight") &&
                    (absl::StrContains(t.name, "ln_") || absl::StartsWith(t.name, "norm."));
  return TensorInit{gain ? TensorInit::kOne : TensorInit::kZero, 0};
}

BlockTensors AddBlock(FlatLayout* layout, const std::string& prefix, const BlockShape& s) {
  const int64_t d = s.d, f = s.hidden;
  BlockTensors t;
  t.ln1_w = layout->Add(prefix + "ln_1.weight", {d});
  t.ln1_b = layout->Add(prefix + "ln_1.bias", {d});
  t.attn_w = layout->Add(prefix + "attn.c_attn.weight", {3 * d, d});
  t.attn_b = layout->Add(prefix + "attn.c_attn.bias", {3 * d});
  t.proj_w = layout->Add(prefix + "attn.c_proj.weight", {d, d});
  t.proj_b = layout->Add(prefix + "attn.c_proj.bias", {d});
  t.ln2_w = layout->Add(prefix + "ln_2.weight", {d});
  t.ln2_b = layout->Add(prefix + "ln_2.bias", {d});
  t.fc_w = layout->Add(prefix + "mlp.c_fc.weight", {f, d});
  t.fc_b = layout->Add(prefix + "mlp.c_fc.bias", {f});
  t.out_w = layout->Add(prefix + "mlp.c_proj.weight", {d, f});
  t.out_b = layout->Add(prefix + "mlp.c_proj.bias", {d});
  t.range = Range{layout->tensor(t.ln1_w).offset, layout->tensor(t.out_b).range().end};
  return t;
}

void BlockActivations::Resize(const BlockShape& s, int batch, int seq, bool bf16) {
  const size_t rows = static_cast<size_t>(batch) * seq, d = static_cast<size_t>(s.d), f = static_cast<size_t>(s.hidden);
  // A product input in the precision not kept holds nothing.
  auto kept = [bf16](std::vector<float>* v, std::vector<Bf16>* h, size_t n) {
    if (bf16) {
      std::vector<float>().swap(*v);
      h->resize(n);
    } else {
      v->resize(n);
      std::vector<Bf16>().swap(*h);
    }
  };
  x.resize(rows * d);
  kept(&ln1, &ln1_h, rows * d);
  mean1.resize(rows);
  rstd1.resize(rows);
  kept(&qkv, &qkv_h, rows * 3 * d);
  probs.resize(static_cast<size_t>(batch) * s.heads * seq * seq);
  kept(&attn, &attn_h, rows * d);
  x_mid.resize(rows * d);
  kept(&ln2, &ln2_h, rows * d);
  mean2.resize(rows);
  rstd2.resize(rows);
  hidden.resize(rows * f);
  kept(&gelu, &gelu_h, rows * f);
  gelu_tanh.resize(rows * f);
}

int64_t BlockActivations::bytes() const {
  return HeldBytes(x, ln1, mean1, rstd1, qkv, probs, attn, x_mid, ln2, mean2, rstd2, hidden, gelu, gelu_tanh) +
         HeldBytes(ln1_h, qkv_h, attn_h, ln2_h, gelu_h);
}

void BlockScratch::Resize(const BlockShape& s, int batch, int seq) {
  const size_t rows = static_cast<size_t>(batch) * seq, d = static_cast<size_t>(s.d), f = static_cast<size_t>(s.hidden);
  d_mid.resize(rows * d);
  d_hidden.resize(rows * f);
  d_attn.resize(rows * d);
  d_qkv.resize(rows * 3 * d);
  d_ln.resize(rows * d);
  scores.resize(static_cast<size_t>(seq) * seq);
}

namespace {

float* G(float* grads, const FlatLayout& layout, int tensor) { return grads + layout.tensor(tensor).offset; }

// A product input the forward keeps (BlockActivations): where its floats
// are written - the kept vector in FP32; in BF16 the products' staging,
// rounded into the kept bfloat16 copy by Keep before the staging is used
// again.
float* Produce(Products* p, std::vector<float>* kept, size_t n) {
  return p->bfloat16() ? p->Staging(static_cast<int64_t>(n)) : kept->data();
}
Matrix Keep(const Products& p, const float* produced, int rows, int cols, std::vector<Bf16>* h) {
  if (!p.bfloat16()) return Floats(produced, rows, cols);
  RoundMatrix(Floats(produced, rows, cols), h->data());
  return RoundedBits(h->data(), rows, cols);
}
// A kept input [rows, cols] as the backward's products read it.
Matrix Kept(const std::vector<float>& f, const std::vector<Bf16>& h, int rows, int cols) {
  return h.empty() ? Floats(f.data(), rows, cols) : RoundedBits(h.data(), rows, cols);
}

}  // namespace

void BlockForward(const BlockCall& c, const float* x, BlockActivations* a, float* out) {
  const BlockShape& s = c.shape;
  const BlockTensors& t = c.tensors;
  const int batch = c.batch, seq = c.seq;
  const int rows = batch * seq, d = s.d, f = s.hidden;
  Products* p = c.products;
  const size_t n = static_cast<size_t>(rows) * d;
  a->Resize(s, batch, seq, p->bfloat16());
  // `out` may be `x`: from here on the input is read from the copy.
  std::copy(x, x + static_cast<int64_t>(rows) * d, a->x.begin());
  float* ln1 = Produce(p, &a->ln1, n);
  LayerNormForward(a->x.data(), c.P(t.ln1_w), c.P(t.ln1_b), rows, d, ln1, a->mean1.data(), a->rstd1.data());
  const Matrix ln1_in = Keep(*p, ln1, rows, d, &a->ln1_h);
  float* qkv = Produce(p, &a->qkv, 3 * n);
  LinearForward(p, ln1_in, c.P(t.attn_w), c.P(t.attn_b), 3 * d, qkv);
  const Matrix qkv_in = Keep(*p, qkv, rows, 3 * d, &a->qkv_h);
  float* attn = Produce(p, &a->attn, n);
  AttentionForward(p, qkv_in, batch, seq, s.heads, s.causal, a->probs.data(), attn);
  const Matrix attn_in = Keep(*p, attn, rows, d, &a->attn_h);
  LinearForward(p, attn_in, c.P(t.proj_w), c.P(t.proj_b), d, a->x_mid.data());
  for (int64_t i = 0; i < static_cast<int64_t>(rows) * d; ++i) a->x_mid[i] += a->x[i];
  float* ln2 = Produce(p, &a->ln2, n);
  LayerNormForward(a->x_mid.data(), c.P(t.ln2_w), c.P(t.ln2_b), rows, d, ln2, a->mean2.data(), a->rstd2.data());
  const Matrix ln2_in = Keep(*p, ln2, rows, d, &a->ln2_h);
  LinearForward(p, ln2_in, c.P(t.fc_w), c.P(t.fc_b), f, a->hidden.data());
  float* gelu = Produce(p, &a->gelu, static_cast<size_t>(rows) * f);
  GeluForward(a->hidden.data(), static_cast<int64_t>(rows) * f, gelu, a->gelu_tanh.data());
  const Matrix gelu_in = Keep(*p, gelu, rows, f, &a->gelu_h);
  LinearForward(p, gelu_in, c.P(t.out_w), c.P(t.out_b), d, out);
  for (int64_t i = 0; i < static_cast<int64_t>(rows) * d; ++i) out[i] += a->x_mid[i];
}

void BlockKvCache::Resize(const BlockShape& s, int context) {
  const size_t d = static_cast<size_t>(s.d), f = static_cast<size_t>(s.hidden);
  keys.resize(static_cast<size_t>(context) * d);
  values.resize(keys.size());
  ln.resize(d);
  qkv.resize(3 * d);
  attn.resize(d);
  proj.resize(d);
  hidden.resize(f);
  gelu.resize(f);
  scores.resize(static_cast<size_t>(context));
  mean.resize(1);
  rstd.resize(1);
}

void BlockForwardCached(const BlockCall& call, int pos, BlockKvCache* c, float* x) {
  const BlockShape& s = call.shape;
  const BlockTensors& t = call.tensors;
  const int d = s.d, f = s.hidden;
  LayerNormForward(x, call.P(t.ln1_w), call.P(t.ln1_b), 1, d, c->ln.data(), c->mean.data(),
                   c->rstd.data());
  Products* p = call.products;
  LinearForward(p, Floats(c->ln.data(), 1, d), call.P(t.attn_w), call.P(t.attn_b), 3 * d, c->qkv.data());
  std::copy(c->qkv.begin() + d, c->qkv.begin() + 2 * d, c->keys.begin() + static_cast<int64_t>(pos) * d);
  std::copy(c->qkv.begin() + 2 * d, c->qkv.end(), c->values.begin() + static_cast<int64_t>(pos) * d);
  AttentionForwardOne(*p, c->qkv.data(), c->keys.data(), c->values.data(), pos, d, s.heads, c->scores.data(),
                      c->attn.data());
  LinearForward(p, Floats(c->attn.data(), 1, d), call.P(t.proj_w), call.P(t.proj_b), d, c->proj.data());
  for (int i = 0; i < d; ++i) x[i] += c->proj[i];
  LayerNormForward(x, call.P(t.ln2_w), call.P(t.ln2_b), 1, d, c->ln.data(), c->mean.data(),
                   c->rstd.data());
  LinearForward(p, Floats(c->ln.data(), 1, d), call.P(t.fc_w), call.P(t.fc_b), f, c->hidden.data());
  GeluForward(c->hidden.data(), f, c->gelu.data());
  LinearForward(p, Floats(c->gelu.data(), 1, f), call.P(t.out_w), call.P(t.out_b), d, c->proj.data());
  for (int i = 0; i < d; ++i) x[i] += c->proj[i];
}

namespace {

// A weight and its bias (or a norm's two vectors), adjacent in the layout.
Range PartRange(const FlatLayout& layout, int w, int b) {
  return Range{layout.tensor(w).offset, layout.tensor(b).range().end};
}

}  // namespace

std::vector<Range> BlockParts(const FlatLayout& layout, const BlockTensors& t) {
  std::vector<Range> parts;
  for (const auto& [w, b] : {std::pair{t.ln1_w, t.ln1_b}, {t.attn_w, t.attn_b}, {t.proj_w, t.proj_b},
                             {t.ln2_w, t.ln2_b}, {t.fc_w, t.fc_b}, {t.out_w, t.out_b}}) {
    parts.push_back(PartRange(layout, w, b));
  }
  return parts;
}

std::vector<Range> WithBlockParts(const std::vector<Range>& layers, const FlatLayout& layout,
                                  const std::vector<BlockTensors>& blocks) {
  std::vector<Range> out;
  for (const Range& layer : layers) {
    const auto block = std::find_if(blocks.begin(), blocks.end(), [&](const BlockTensors& b) { return b.range == layer; });
    if (block == blocks.end()) {
      out.push_back(layer);
      continue;
    }
    for (const Range& part : BlockParts(layout, *block)) out.push_back(part);
  }
  return out;
}

void BlockBackward(const BlockCall& c, const BlockActivations& a, bool accumulate, float* grads, BlockScratch* sc,
                   float* dx) {
  const BlockShape& s = c.shape;
  const BlockTensors& t = c.tensors;
  const FlatLayout& layout = c.layout;
  const int batch = c.batch, seq = c.seq;
  const int rows = batch * seq, d = s.d, f = s.hidden;
  const int64_t n = static_cast<int64_t>(rows) * d;
  sc->Resize(s, batch, seq);
  // Each part (a weight and its bias, adjacent in the layout) announced
  // before its gradients are written and once its parameters are read for
  // the last time: at ZeRO-3 a block's gradients are then whole one part
  // at a time, and its parameters given back part by part.
  auto begin = [&](int w, int b) {
    if (c.ws != nullptr) c.ws->BeforeGradient(PartRange(layout, w, b));
  };
  auto end = [&](int w, int b) {
    if (c.ws != nullptr) c.ws->AfterBackward(PartRange(layout, w, b));
  };
  // The MLP branch: dx is d(out), which also flows straight to x_mid.
  begin(t.out_w, t.out_b);
  Products* p = c.products;
  LinearBackward(p, dx, Kept(a.gelu, a.gelu_h, rows, f), c.P(t.out_w), d, accumulate, sc->d_hidden.data(),
                 G(grads, layout, t.out_w), G(grads, layout, t.out_b));
  end(t.out_w, t.out_b);
  GeluBackward(sc->d_hidden.data(), a.hidden.data(), a.gelu_tanh.data(), static_cast<int64_t>(rows) * f,
               sc->d_hidden.data());
  begin(t.fc_w, t.fc_b);
  LinearBackward(p, sc->d_hidden.data(), Kept(a.ln2, a.ln2_h, rows, d), c.P(t.fc_w), f, accumulate, sc->d_ln.data(),
                 G(grads, layout, t.fc_w), G(grads, layout, t.fc_b));
  end(t.fc_w, t.fc_b);
  begin(t.ln2_w, t.ln2_b);
  LayerNormBackward(sc->d_ln.data(), a.x_mid.data(), a.mean2.data(), a.rstd2.data(), c.P(t.ln2_w), rows,
                    d, accumulate, sc->d_mid.data(), G(grads, layout, t.ln2_w), G(grads, layout, t.ln2_b));
  end(t.ln2_w, t.ln2_b);
  for (int64_t i = 0; i < n; ++i) sc->d_mid[i] += dx[i];
  // The attention branch: d_mid is d(x_mid), which also flows straight to x.
  begin(t.proj_w, t.proj_b);
  LinearBackward(p, sc->d_mid.data(), Kept(a.attn, a.attn_h, rows, d), c.P(t.proj_w), d, accumulate,
                 sc->d_attn.data(), G(grads, layout, t.proj_w), G(grads, layout, t.proj_b));
  end(t.proj_w, t.proj_b);
  AttentionBackward(p, sc->d_attn.data(), Kept(a.qkv, a.qkv_h, rows, 3 * d), a.probs.data(), batch, seq, s.heads,
                    s.causal, sc->d_qkv.data(), sc->scores.data());
  begin(t.attn_w, t.attn_b);
  LinearBackward(p, sc->d_qkv.data(), Kept(a.ln1, a.ln1_h, rows, d), c.P(t.attn_w), 3 * d, accumulate,
                 sc->d_ln.data(), G(grads, layout, t.attn_w), G(grads, layout, t.attn_b));
  end(t.attn_w, t.attn_b);
  begin(t.ln1_w, t.ln1_b);
  LayerNormBackward(sc->d_ln.data(), a.x.data(), a.mean1.data(), a.rstd1.data(), c.P(t.ln1_w), rows, d,
                    accumulate, dx, G(grads, layout, t.ln1_w), G(grads, layout, t.ln1_b));
  end(t.ln1_w, t.ln1_b);
  for (int64_t i = 0; i < n; ++i) dx[i] += sc->d_mid[i];
}

int64_t BlockStackBytes(const BlockShape& s, int batch, int seq, int count, bool remat, Precision precision) {
  if (count == 0) return 0;
  const int64_t rows = int64_t{batch} * seq, d = s.d, f = s.hidden;
  const int64_t kept_size = precision == Precision::kBfloat16 ? sizeof(Bf16) : sizeof(float);
  // x, x_mid, hidden, gelu_tanh, mean/rstd twice, probs: float32; ln1, qkv,
  // attn, ln2, gelu: in the kept precision (BlockActivations::Resize).
  const int64_t one = (rows * (2 * d + 2 * f + 4) + int64_t{batch} * s.heads * seq * seq) * int64_t{sizeof(float)} +
                      rows * (6 * d + f) * kept_size;
  if (!remat) return count * one;
  // One block's activations, every block's input, and (more than one
  // block) a recomputed block's output.
  return one + (count + (count > 1 ? 1 : 0)) * rows * d * int64_t{sizeof(float)};
}

void NoteBlockScratch(const BlockShape& s, int batch, int seq, ProductScratch* scratch) {
  const int rows = batch * seq, d = s.d, f = s.hidden;
  scratch->NoteStaging(int64_t{rows} * std::max(3 * d, f));  // qkv or gelu, produced before kept
  // Every product input is kept rounded.
  NoteLinearScratch(rows, d, 3 * d, false, scratch);
  NoteLinearScratch(rows, d, d, false, scratch);
  NoteLinearScratch(rows, d, f, false, scratch);
  NoteLinearScratch(rows, f, d, false, scratch);
  NoteAttentionScratch(seq, d, s.heads, s.causal, false, scratch);
}

int64_t BlockScratchBytes(const BlockShape& s, int batch, int seq) {
  const int64_t rows = int64_t{batch} * seq;
  return (rows * (6 * int64_t{s.d} + s.hidden) + int64_t{seq} * seq) * int64_t{sizeof(float)};
}

int64_t BlockScratch::bytes() const { return HeldBytes(d_mid, d_hidden, d_attn, d_qkv, d_ln, scores); }

int64_t BlockStack::bytes() const {
  int64_t sum = HeldBytes(recomputed, inputs);
  for (const BlockActivations& a : acts) sum += a.bytes();
  return sum;
}

void StackForward(const BlockCall& c, const float* x, BlockStack* stack, float* out) {
  if (!stack->remat) {
    stack->acts.resize(c.count);
    stack->inputs.clear();
    BlockForward(c, x, &stack->acts[c.index], out);
    return;
  }
  stack->acts.resize(1);
  stack->inputs.resize(c.count);
  stack->inputs[c.index].assign(x, x + static_cast<int64_t>(c.batch) * c.seq * c.shape.d);
  BlockForward(c, x, &stack->acts[0], out);
}

void StackBackward(const BlockCall& c, bool accumulate, float* grads, BlockScratch* scratch, BlockStack* stack,
                   float* dx) {
  if (!stack->remat) {
    BlockBackward(c, stack->acts[c.index], accumulate, grads, scratch, dx);
    return;
  }
  if (c.index + 1 < c.count) {  // the last block's activations are the forward's own
    stack->recomputed.resize(stack->inputs[c.index].size());
    BlockForward(c, stack->inputs[c.index].data(), &stack->acts[0], stack->recomputed.data());
  }
  BlockBackward(c, stack->acts[0], accumulate, grads, scratch, dx);
}

}  // namespace shardline
