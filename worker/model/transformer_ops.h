// The operations of a transformer block, forward and backward, on row-major
// float buffers, the matmuls through Products (products.h) in its precision
// (float32, or bfloat16 operands accumulated in float32; every other
// computation is float32 either way). Every op is a plain
// function of its inputs with a fixed order of summation, so the same
// inputs give the same bits. Backward functions with `accumulate` add
// parameter gradients to what the buffers hold; without, they overwrite.
// Input gradients (dx) are always overwritten.
//
// Shapes: R rows (examples x positions), d features; a Linear's weight is
// [out, in] (PyTorch's nn.Linear), y = x W^T + b.
#ifndef SHARDLINE_WORKER_MODEL_TRANSFORMER_OPS_H_
#define SHARDLINE_WORKER_MODEL_TRANSFORMER_OPS_H_

#include <algorithm>
#include <cstdint>

#include "worker/model/products.h"

namespace shardline {

// PyTorch's LayerNorm default.
inline constexpr float kLayerNormEps = 1e-5f;

// y = (x - mean) * rstd * gamma + beta per row of x [rows, d], with the
// biased variance; saves mean and rstd [rows] for backward.
void LayerNormForward(const float* x, const float* gamma, const float* beta, int rows, int d, float* y,
                      float* mean, float* rstd);
// dx [rows, d] from dy; dgamma, dbeta [d].
void LayerNormBackward(const float* dy, const float* x, const float* mean, const float* rstd, const float* gamma,
                       int rows, int d, bool accumulate, float* dx, float* dgamma, float* dbeta);

// A Linear's input x is a Matrix [rows, in]: floats, or in BF16 already
// rounded (a transformer block keeps its products' inputs only rounded:
// the bits of rounding the floats at every product, in half the memory).
//
// y [rows, out] = x W^T + b: w [out, in], b [out] (null: none).
void LinearForward(Products* p, const Matrix& x, const float* w, const float* b, int out, float* y);
// dx [rows, in] (null: not wanted) = dy W; dw [out, in] (+)= dy^T x;
// db [out] (+)= column sums of dy (null: no bias); dy is [rows, out].
void LinearBackward(Products* p, const float* dy, const Matrix& x, const float* w, int out, bool accumulate,
                    float* dx, float* dw, float* db);

// tanh(x) as Eigen's single-precision rational approximation (a degree-13
// odd polynomial over a degree-6 even one, the input clamped to
// +-7.905...): within 4e-7 of tanh everywhere (3.6e-7 at worst, tested). Plain
// branch-free arithmetic, so loops over it vectorize; glibc's scalar tanhf
// was 37% of a GPT step (perf, bench/RESULTS.md).
inline float FastTanh(float x) {
  x = std::min(7.90531110763549805f, std::max(-7.90531110763549805f, x));
  const float x2 = x * x;
  float p = -2.76076847742355e-16f;
  p = p * x2 + 2.00018790482477e-13f;
  p = p * x2 + -8.60467152213735e-11f;
  p = p * x2 + 5.12229709037114e-08f;
  p = p * x2 + 1.48572235717979e-05f;
  p = p * x2 + 6.37261928875436e-04f;
  p = p * x2 + 4.89352455891786e-03f;
  float q = 1.19825839466702e-06f;
  q = q * x2 + 1.18534705686654e-04f;
  q = q * x2 + 2.26843463243900e-03f;
  q = q * x2 + 4.89352518554385e-03f;
  return x * p / q;
}

// GELU with the tanh approximation (PyTorch's approximate="tanh"),
// elementwise, tanh by FastTanh. With `tanh_out` (else null), also keeps
// each element's tanh for the backward, which then does not compute it
// again (it was 5% of a GPT step).
void GeluForward(const float* x, int64_t n, float* y, float* tanh_out = nullptr);
// dx = dy * GELU'(x), from the forward's x and its `tanh_out`; dx may be dy.
void GeluBackward(const float* dy, const float* x, const float* tanh_in, int64_t n, float* dx);

// Multi-head self-attention on qkv [batch * seq, 3 * d] (each row q | k | v,
// heads side by side within each; floats, or in BF16 already rounded): for
// each example and head, scores Q K^T / sqrt(d / heads), masked to j <= i
// if causal, a softmax that subtracts each row's maximum, then P V into y
// [batch * seq, d]. Saves the probabilities P [batch, heads, seq, seq]
// (zero where masked).
void AttentionForward(Products* p, const Matrix& qkv, int batch, int seq, int heads, bool causal, float* probs,
                      float* y);
// The same attention for one new position `pos` of one sequence (causal,
// the KV-cached forward of sampling): q [d] (heads side by side) against
// keys and values [pos + 1, d] (rows 0..pos, row pos its own), into y [d];
// `scores` holds pos + 1 floats. Its products are written out here, their
// operands rounded as Products would in BF16.
void AttentionForwardOne(const Products& p, const float* q, const float* keys, const float* values, int pos, int d,
                         int heads, float* scores, float* y);
// Causal attention works in row blocks of 32 queries, each against only the
// keys up to its last row: the masked products are not computed.
//
// dqkv [batch * seq, 3 * d] from dy [batch * seq, d], with the forward's
// `causal`; `scratch` holds seq * seq floats.
void AttentionBackward(Products* p, const float* dy, const Matrix& qkv, const float* probs, int batch, int seq,
                       int heads, bool causal, float* dqkv, float* scratch);

// What the ops above hold in Products' slots (BF16), for a model's
// WorkspaceBytes: attention's forward and backward on sequences of `seq`
// (qkv given as floats or rounded), a Linear's forward and backward on
// `rows` rows (x given as floats or rounded; its weight outside a
// KeepRoundedWeights scope).
void NoteAttentionScratch(int seq, int d, int heads, bool causal, bool float_qkv, ProductScratch* scratch);
void NoteLinearScratch(int rows, int in, int out, bool float_input, ProductScratch* scratch);

// x [batch * seq, d] = wte[tokens] + wpe[position].
void EmbeddingForward(const int32_t* tokens, const float* wte, const float* wpe, int batch, int seq, int d, float* x);
// dwte[tokens] += dx rows and dwpe[position] += dx rows, in row order; with
// accumulate false, dwpe is overwritten first (dwte is not touched but
// added to: the tied head has written it already).
void EmbeddingBackward(const float* dx, const int32_t* tokens, int batch, int seq, int d, bool accumulate_wpe,
                       float* dwte, float* dwpe);

}  // namespace shardline

#endif  // SHARDLINE_WORKER_MODEL_TRANSFORMER_OPS_H_
