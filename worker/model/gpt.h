// A decoder-only transformer over bytes (model.gpt in config.proto), GPT-2
// style as nanoGPT writes it: token and learned position embeddings,
// pre-LayerNorm blocks of causal multi-head self-attention and a GELU MLP
// (transformer_block.h), a final LayerNorm, and a head tied to the token
// embedding (logits = ln_f(x) wte^T). Loss: the cross-entropy of every
// position's next byte.
//
// Tensors, in flat order, named as nanoGPT's GPT names them (so an exported
// checkpoint loads into it; docs/models.md):
//   transformer.wte.weight [vocab, d]   transformer.wpe.weight [context, d]
//   transformer.h.<i>.*  (transformer_block.h)
//   transformer.ln_f.weight [d]         transformer.ln_f.bias [d]
// Initialisation (GPT-2): weights and embeddings normal(0, 0.02), the
// residual projections (attn.c_proj, mlp.c_proj) normal(0, 0.02 /
// sqrt(2 * layers)), biases 0, LayerNorm weights 1.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<Model> gpt, Gpt::Create(spec));
#ifndef SHARDLINE_WORKER_MODEL_GPT_H_
#define SHARDLINE_WORKER_MODEL_GPT_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/model/flat_layout.h"
#include "worker/model/model.h"
#include "worker/model/transformer_block.h"

namespace shardline {

struct GptSpec {
  int vocab = 256;
  int context = 128;
  int layers = 4;
  int d_model = 128;
  int heads = 4;
  int mlp_ratio = 4;
  bool remat = false;  // recompute each block's activations in backward (config train.remat)
  Precision precision = Precision::kFloat32;  // of the matrix products (config train.precision)
};

struct GptWorkspace : ModelWorkspace {
  using ModelWorkspace::ModelWorkspace;
  // Set to keep a copy of the logits (before the softmax) in `logits`.
  bool keep_logits = false;
  std::vector<float> logits;
  int batch = 0;
  BlockStack stack;  // what the blocks keep for backward
  std::vector<float> stream;  // the residual stream between blocks [rows, d]
  std::vector<float> final_x, ln_f, mean_f, rstd_f;
  std::vector<float> probs;  // [rows, vocab]: logits, then softmax
  std::vector<float> d_logits, d_ln, dx;
  BlockScratch scratch;
  int64_t OwnBytes() const override {
    return stack.bytes() + scratch.bytes() +
           HeldBytes(logits, stream, final_x, ln_f, mean_f, rstd_f, probs, d_logits, d_ln, dx);
  }
};

// What sampling's forward keeps (Gpt::ForwardCached): every block's keys
// and values of the positions run so far, and one position's scratch.
struct GptKvCache {
  Products products;  // its products, one position at a time
  std::vector<BlockKvCache> blocks;
  std::vector<float> x, ln, mean, rstd;
  std::vector<float> logits;  // [vocab]: of the byte after the last position run
};

class Gpt : public Model {
 public:
  // Fails naming the field if the spec cannot make a model.
  static absl::StatusOr<std::unique_ptr<Model>> Create(const GptSpec& spec);

  const FlatLayout& layout() const override { return layout_; }
  const InputShape& input() const override { return input_; }
  const GptSpec& spec() const { return spec_; }

  // Matmul FLOPs per example (context positions): per position and layer
  // 2 * (3d*d + d*d + 2*d*F) for the linears and 4 * context * d for the
  // attention scores and values (all of them: the causal half that is
  // masked is computed too), plus 2 * d * vocab for the head; times 3 for
  // training (forward, weight and input gradients).
  int64_t TrainFlopsPerExample() const override;

  void InitRange(uint64_t seed, Range range, float* out) const override;
  int64_t WorkspaceBytes(int batch) const override;
  std::vector<Range> GradientParts() const override { return WithBlockParts(Layers(), layout_, blocks_); }
  std::vector<Range> ReadAgainAfterLast() const override { return {Embeddings()}; }  // the tied head
  std::vector<Range> Layers() const override {
    std::vector<Range> out = {Embeddings()};
    for (const BlockTensors& b : blocks_) out.push_back(b.range);
    out.push_back(FinalNorm());
    return out;
  }
  std::unique_ptr<ModelWorkspace> NewWorkspace() const override {
    return std::make_unique<GptWorkspace>(spec_.precision);
  }

  // `batch.tokens` and `batch.y` are [n, context]; `ws` a GptWorkspace.
  BatchStats Forward(const float* params, const Examples& batch, ModelWorkspace* ws) const override;
  void Backward(const float* params, const Examples& batch, float grad_scale, bool accumulate, float* grads,
                ModelWorkspace* ws) const override;
  // Evaluation in chunks of a few sequences, to bound the attention probabilities kept.
  int eval_chunk() const override { return kEvalChunk; }
  static constexpr int kEvalChunk = 16;

  // Sampling's forward, one position at a time (gpt_sampler.h): `token` at
  // position `pos` < context of one sequence, after positions 0..pos-1 went
  // through with the same cache; leaves the logits of the byte after it in
  // cache->logits. The same ops as Forward's on that position, attention
  // reading the cached keys and values (BlockForwardCached).
  void ForwardCached(const float* params, int32_t token, int pos, GptKvCache* cache) const;
  // An empty cache for up to context positions.
  GptKvCache NewKvCache() const;

 private:
  explicit Gpt(const GptSpec& spec);
  // The layers (model.h: LayerHooks) outside the blocks.
  Range Embeddings() const { return Range{layout_.tensor(wte_).offset, layout_.tensor(wpe_).range().end}; }
  Range FinalNorm() const { return Range{layout_.tensor(ln_f_w_).offset, layout_.tensor(ln_f_b_).range().end}; }

  GptSpec spec_;
  BlockShape shape_;
  InputShape input_;
  FlatLayout layout_;
  int wte_ = 0, wpe_ = 0, ln_f_w_ = 0, ln_f_b_ = 0;
  std::vector<BlockTensors> blocks_;
};

}  // namespace shardline

#endif  // SHARDLINE_WORKER_MODEL_GPT_H_
