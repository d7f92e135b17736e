// One pre-LayerNorm transformer block, shared by the GPT (causal) and the
// ViT (full attention):
//
//   x_mid = x + c_proj(attention(c_attn(ln_1(x))))
//   out   = x_mid + mlp.c_proj(gelu(mlp.c_fc(ln_2(x_mid))))
//
// Its tensors are named as nanoGPT names them under `prefix` (e.g.
// "transformer.h.0."): ln_1.weight, ln_1.bias, attn.c_attn.weight [3d, d],
// attn.c_attn.bias, attn.c_proj.weight [d, d], attn.c_proj.bias,
// ln_2.weight, ln_2.bias, mlp.c_fc.weight [F, d], mlp.c_fc.bias,
// mlp.c_proj.weight [d, F], mlp.c_proj.bias (docs/models.md).
#ifndef SHARDLINE_WORKER_MODEL_TRANSFORMER_BLOCK_H_
#define SHARDLINE_WORKER_MODEL_TRANSFORMER_BLOCK_H_

#include <string>
#include <vector>

#include "common/job/shard.h"
#include "worker/model/flat_layout.h"
#include "worker/model/products.h"
#include "worker/model/init.h"

namespace shardline {

class ModelWorkspace;

struct BlockShape {
  int d = 0;       // d_model
  int heads = 0;   // divides d
  int hidden = 0;  // the MLP's width, mlp_ratio * d
  bool causal = true;
};

// Indices into the layout of one block's tensors, in layout order.
struct BlockTensors {
  int ln1_w, ln1_b, attn_w, attn_b, proj_w, proj_b, ln2_w, ln2_b, fc_w, fc_b, out_w, out_b;
  Range range;  // every tensor of the block: one layer for the LayerHooks
};

// The GPT-2 initialisation of a transformer's tensor, shared by the GPT and
// the ViT: matrices and embeddings normal(0, 0.02), the residual
// projections (names ending "c_proj.weight") normal(0, 0.02 / sqrt(2 *
// layers)), LayerNorm weights 1 (ln_1, ln_2, ln_f, norm), everything else
// (biases) 0.
TensorInit Gpt2Init(const TensorInfo& tensor, int layers);

// Appends a block's tensors to `layout`.
BlockTensors AddBlock(FlatLayout* layout, const std::string& prefix, const BlockShape& shape);

// What a block's forward keeps for its backward, for `rows` rows of
// `batch` sequences of `seq`. The inputs of its matrix products (ln1, qkv,
// attn, ln2, gelu) are kept in the products' precision: float32, or in
// BF16 only their bfloat16 rounding (the *_h vectors; the float ones stay
// empty), which is all the backward's products read. Everything else
// (LayerNorm's and GELU's inputs, the attention probabilities of the
// softmax's backward) stays float32.
struct BlockActivations {
  std::vector<float> x;     // the block's input [rows, d]
  std::vector<float> ln1, mean1, rstd1, qkv, probs, attn, x_mid, ln2, mean2, rstd2, hidden, gelu,
      gelu_tanh;  // GELU's tanh of each hidden element, for its backward
  std::vector<Bf16> ln1_h, qkv_h, attn_h, ln2_h, gelu_h;  // BF16: the products' inputs, rounded
  void Resize(const BlockShape& shape, int batch, int seq, bool bf16);
  int64_t bytes() const;
};

// Scratch of a block's backward, reused across blocks.
struct BlockScratch {
  std::vector<float> d_mid, d_hidden, d_attn, d_qkv, d_ln, scores;
  void Resize(const BlockShape& shape, int batch, int seq);
  int64_t bytes() const;
};

// What every block function is given: which block of which model's
// parameters, on which rows (`batch` sequences of `seq` positions; rows =
// batch * seq), and where it stands in its stack (block `index` of
// `count`, for StackForward / StackBackward).
struct BlockCall {
  const float* params;  // the model's flat parameters
  const FlatLayout& layout;
  const BlockTensors& tensors;
  const BlockShape& shape;
  int batch = 1;
  int seq = 1;
  size_t index = 0;
  size_t count = 1;
  Products* products = nullptr;  // every matrix product, in the model's precision
  // Told of each part's gradients before they are written and once they
  // are final (LayerHooks: before_gradient, after_backward), in the
  // backward; null: nobody.
  const ModelWorkspace* ws = nullptr;
  // A tensor of this block's, by its index in the layout.
  const float* P(int tensor) const { return params + layout.tensor(tensor).offset; }
};

// The parts of a block its backward announces (LayerHooks: before_gradient,
// after_backward), each a weight and its bias or a norm's two vectors, in
// ascending order: together the block's range.
std::vector<Range> BlockParts(const FlatLayout& layout, const BlockTensors& t);
// `layers` with each block's range replaced by its parts (BlockParts): a
// transformer's GradientParts from its Layers.
std::vector<Range> WithBlockParts(const std::vector<Range>& layers, const FlatLayout& layout,
                                  const std::vector<BlockTensors>& blocks);

// out [rows, d] from x [rows, d] (copied into acts->x).
void BlockForward(const BlockCall& c, const float* x, BlockActivations* acts, float* out);

// What a block's cached forward keeps of the positions it has run (their
// keys and values, for later positions to attend to), and its scratch for
// one position: the KV cache of sampling.
struct BlockKvCache {
  std::vector<float> keys, values;  // [context, d]
  std::vector<float> ln, qkv, attn, proj, hidden, gelu, scores, mean, rstd;
  void Resize(const BlockShape& shape, int context);
};

// The causal block's forward for position `pos` of one sequence, given
// that positions 0..pos-1 went through it before (their keys and values in
// `cache`): x [d], the block's input at pos, becomes its output; the
// position's key and value join the cache. The same ops as BlockForward's
// on that row, one position at a time (attention by AttentionForwardOne).
void BlockForwardCached(const BlockCall& c, int pos, BlockKvCache* cache, float* x);

// In: dx holds d(loss)/d(out); out: d(loss)/d(x). Parameter gradients
// into grads (flat layout), added with `accumulate`.
void BlockBackward(const BlockCall& c, const BlockActivations& acts, bool accumulate, float* grads,
                   BlockScratch* scratch, float* dx);

// What a stack of blocks keeps from its forward for its backward: every
// block's activations, or with remat (config train.remat) every block's
// input and one block's activations, recomputed in the backward from that
// input (the same bits: BlockForward is a pure function of its inputs).
// What a BlockStack of `count` blocks (remat or not) and a BlockScratch
// hold after a forward and backward of `batch` sequences of `seq` tokens,
// from the shapes alone (Model::WorkspaceBytes).
int64_t BlockStackBytes(const BlockShape& s, int batch, int seq, int count, bool remat, Precision precision);
int64_t BlockScratchBytes(const BlockShape& s, int batch, int seq);
// What a block's forward and backward hold in its Products (BF16).
void NoteBlockScratch(const BlockShape& s, int batch, int seq, ProductScratch* scratch);

struct BlockStack {
  bool remat = false;
  std::vector<BlockActivations> acts;         // one per block; one in all with remat
  std::vector<std::vector<float>> inputs;     // remat: each block's input [rows, d]
  std::vector<float> recomputed;              // remat: a recomputed block's output, unused
  int64_t bytes() const;                      // held by all of the above
};

// Block c.index of c.count in the forward: out [rows, d] from x, as
// BlockForward.
void StackForward(const BlockCall& c, const float* x, BlockStack* stack, float* out);

// Block c.index's backward, as BlockBackward, after StackForward of every
// block (in the backward's order: index = count - 1 first). With remat it
// first recomputes the block's activations from its input (the last
// block's are still there), reading its parameters.
void StackBackward(const BlockCall& c, bool accumulate, float* grads, BlockScratch* scratch, BlockStack* stack,
                   float* dx);

}  // namespace shardline

#endif  // SHARDLINE_WORKER_MODEL_TRANSFORMER_BLOCK_H_
