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
#include "worker/model/init.h"

namespace shardline {

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
// `batch` sequences of `seq`.
struct BlockActivations {
  std::vector<float> x;     // the block's input [rows, d]
  std::vector<float> ln1, mean1, rstd1, qkv, probs, attn, x_mid, ln2, mean2, rstd2, hidden, gelu,
      gelu_tanh;  // GELU's tanh of each hidden element, for its backward
  void Resize(const BlockShape& shape, int batch, int seq);
};

// Scratch of a block's backward, reused across blocks.
struct BlockScratch {
  std::vector<float> d_mid, d_hidden, d_attn, d_qkv, d_ln, scores;
  void Resize(const BlockShape& shape, int batch, int seq);
};

// out [rows, d] from x [rows, d] (copied into acts->x).
void BlockForward(const float* params, const FlatLayout& layout, const BlockTensors& t, const BlockShape& shape,
                  int batch, int seq, const float* x, BlockActivations* acts, float* out);

// In: dx holds d(loss)/d(out); out: d(loss)/d(x). Parameter gradients
// into grads (flat layout), added with `accumulate`.
void BlockBackward(const float* params, const FlatLayout& layout, const BlockTensors& t, const BlockShape& shape,
                   int batch, int seq, const BlockActivations& acts, bool accumulate, float* grads,
                   BlockScratch* scratch, float* dx);

}  // namespace shardline

#endif  // SHARDLINE_WORKER_MODEL_TRANSFORMER_BLOCK_H_
