#include "worker/model/transformer_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "common/encoding/bf16.h"
#include "common/platform/vector_clones.h"
#include "worker/model/gemm.h"
#include "worker/model/rounded_weights.h"

// The elementwise loops below (GELU, LayerNorm, the softmax) compiled
// twice, for AVX-512 and for the baseline, the copy picked at load time by
// the CPU: wider vectors of the same operations in the same order, so the
// same bits (no floating-point contraction: -ffp-contract=off; sums are
// never reordered: no -ffast-math). GELU's FastTanh was 10% of a BF16 GPT
// step in baseline SSE (perf, bench/RESULTS.md).
// (vector_clones.h says where.)
#define SHARDLINE_VECTOR_CLONES SHARDLINE_TARGET_CLONES("avx512f", "default")

namespace shardline {

namespace {

// Sums in four double lanes, element i into lane i % 4 (the tail into lane
// 0), the lanes added as (0 + 1) + (2 + 3): a fixed order, and four
// independent chains instead of one (a serial double sum was most of
// LayerNorm's time, and LayerNorm 4% of a GPT step).
struct LaneSum {
  double lane[4] = {0, 0, 0, 0};
  double Total() const { return (lane[0] + lane[1]) + (lane[2] + lane[3]); }
};

}  // namespace

SHARDLINE_VECTOR_CLONES void LayerNormForward(const float* x, const float* gamma, const float* beta, int rows, int d, float* y,
                      float* mean, float* rstd) {
  const int body = d / 4 * 4;
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + static_cast<int64_t>(r) * d;
    float* yr = y + static_cast<int64_t>(r) * d;
    LaneSum sum;
    for (int i = 0; i < body; i += 4) {
      for (int k = 0; k < 4; ++k) sum.lane[k] += xr[i + k];
    }
    for (int i = body; i < d; ++i) sum.lane[0] += xr[i];
    const float m = static_cast<float>(sum.Total() / d);
    LaneSum sq;
    for (int i = 0; i < body; i += 4) {
      for (int k = 0; k < 4; ++k) {
        const double c = static_cast<double>(xr[i + k]) - m;
        sq.lane[k] += c * c;
      }
    }
    for (int i = body; i < d; ++i) {
      const double c = static_cast<double>(xr[i]) - m;
      sq.lane[0] += c * c;
    }
    const float s = static_cast<float>(1.0 / std::sqrt(sq.Total() / d + kLayerNormEps));
    for (int i = 0; i < d; ++i) yr[i] = (xr[i] - m) * s * gamma[i] + beta[i];
    mean[r] = m;
    rstd[r] = s;
  }
}

SHARDLINE_VECTOR_CLONES void LayerNormBackward(const float* dy, const float* x, const float* mean, const float* rstd, const float* gamma,
                       int rows, int d, bool accumulate, float* dx, float* dgamma, float* dbeta) {
  if (!accumulate) {
    std::fill(dgamma, dgamma + d, 0.0f);
    std::fill(dbeta, dbeta + d, 0.0f);
  }
  const int body = d / 4 * 4;
  for (int r = 0; r < rows; ++r) {
    const float* dyr = dy + static_cast<int64_t>(r) * d;
    const float* xr = x + static_cast<int64_t>(r) * d;
    float* dxr = dx + static_cast<int64_t>(r) * d;
    const float m = mean[r], s = rstd[r];
    for (int i = 0; i < d; ++i) {
      const float xhat = (xr[i] - m) * s;
      dgamma[i] += dyr[i] * xhat;
      dbeta[i] += dyr[i];
    }
    // dxhat = dy * gamma; dx = s * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)).
    LaneSum sum_dxhat, sum_dxhat_xhat;
    for (int i = 0; i < body; i += 4) {
      for (int k = 0; k < 4; ++k) {
        const float xhat = (xr[i + k] - m) * s;
        const float dxhat = dyr[i + k] * gamma[i + k];
        sum_dxhat.lane[k] += dxhat;
        sum_dxhat_xhat.lane[k] += static_cast<double>(dxhat) * xhat;
      }
    }
    for (int i = body; i < d; ++i) {
      const float xhat = (xr[i] - m) * s;
      const float dxhat = dyr[i] * gamma[i];
      sum_dxhat.lane[0] += dxhat;
      sum_dxhat_xhat.lane[0] += static_cast<double>(dxhat) * xhat;
    }
    const float a = static_cast<float>(sum_dxhat.Total() / d), b = static_cast<float>(sum_dxhat_xhat.Total() / d);
    for (int i = 0; i < d; ++i) {
      const float xhat = (xr[i] - m) * s;
      dxr[i] = s * (dyr[i] * gamma[i] - a - xhat * b);
    }
  }
}

namespace {

// This thread's bfloat16 copies of what the products read that was not
// kept rounded (BF16 only): a Linear's float input, weight and output
// gradient; a sequence's q, k, v and dO, and a block of probabilities or
// their gradients, in attention.
struct RoundedScratch {
  std::vector<Bf16> x, w, dy, qkv, block;
};
RoundedScratch& Scratch() {
  thread_local RoundedScratch scratch;
  return scratch;
}

// rows x cols floats (row stride ld) rounded into `buf` (row stride cols).
const Bf16* RoundInto(const float* f, int rows, int cols, int ld, std::vector<Bf16>* buf) {
  buf->resize(static_cast<size_t>(rows) * cols);
  RoundToBfloat16(f, rows, cols, ld, buf->data(), cols);
  return buf->data();
}

}  // namespace

void LinearForward(Precision precision, KeptInput x, const float* w, const float* b, int rows, int in, int out,
                   float* y) {
  if (b != nullptr) {
    for (int r = 0; r < rows; ++r) std::memcpy(y + static_cast<int64_t>(r) * out, b, sizeof(float) * out);
  }
  const float beta = b != nullptr ? 1.0f : 0.0f;
  if (precision != Precision::kBfloat16) {
    Gemm(precision, false, true, rows, out, in, 1.0f, x.f, in, w, in, beta, y, out);
    return;
  }
  // Gemm(kBfloat16) on the floats x.h was rounded from: the same bits.
  RoundedScratch& r = Scratch();
  const Bf16* x16 = x.h != nullptr ? x.h : RoundInto(x.f, rows, in, in, &r.x);
  GemmBf16(false, true, rows, out, in, 1.0f, x16, in, RoundedWeight(w, out, in, &r.w), in, beta, y, out);
}

void LinearForward(Precision precision, const float* x, const float* w, const float* b, int rows, int in, int out,
                   float* y) {
  LinearForward(precision, KeptInput{x, nullptr}, w, b, rows, in, out, y);
}

void LinearBackward(Precision precision, const float* dy, KeptInput x, const float* w, int rows, int in, int out,
                    bool accumulate, float* dx, float* dw, float* db) {
  const float beta = accumulate ? 1.0f : 0.0f;
  if (precision == Precision::kBfloat16) {
    // dy rounded once for both products: the bits of Gemm(kBfloat16),
    // which would round it for each.
    RoundedScratch& r = Scratch();
    const Bf16* dy16 = RoundInto(dy, rows, out, out, &r.dy);
    if (dx != nullptr) {
      GemmBf16(false, false, rows, in, out, 1.0f, dy16, out, RoundedWeight(w, out, in, &r.w), in, 0.0f, dx, in);
    }
    const Bf16* x16 = x.h != nullptr ? x.h : RoundInto(x.f, rows, in, in, &r.x);
    GemmBf16(true, false, out, in, rows, 1.0f, dy16, out, x16, in, beta, dw, in);
  } else {
    if (dx != nullptr) Gemm(precision, false, false, rows, in, out, 1.0f, dy, out, w, in, 0.0f, dx, in);
    Gemm(precision, true, false, out, in, rows, 1.0f, dy, out, x.f, in, beta, dw, in);
  }
  if (db == nullptr) return;
  if (!accumulate) std::fill(db, db + out, 0.0f);
  for (int r = 0; r < rows; ++r) {
    const float* dyr = dy + static_cast<int64_t>(r) * out;
    for (int o = 0; o < out; ++o) db[o] += dyr[o];
  }
}

void LinearBackward(Precision precision, const float* dy, const float* x, const float* w, int rows, int in, int out,
                    bool accumulate, float* dx, float* dw, float* db) {
  LinearBackward(precision, dy, KeptInput{x, nullptr}, w, rows, in, out, accumulate, dx, dw, db);
}

namespace {

constexpr float kGeluK = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluC = 0.044715f;

}  // namespace

SHARDLINE_VECTOR_CLONES void GeluForward(const float* x, int64_t n, float* y, float* tanh_out) {
  if (tanh_out == nullptr) {
    for (int64_t i = 0; i < n; ++i) {
      const float v = x[i];
      y[i] = 0.5f * v * (1.0f + FastTanh(kGeluK * (v + kGeluC * v * v * v)));
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float t = FastTanh(kGeluK * (v + kGeluC * v * v * v));
    tanh_out[i] = t;
    y[i] = 0.5f * v * (1.0f + t);
  }
}

SHARDLINE_VECTOR_CLONES void GeluBackward(const float* dy, const float* x, const float* tanh_in, int64_t n, float* dx) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float t = tanh_in[i];
    const float dt = kGeluK * (1.0f + 3.0f * kGeluC * v * v);
    dx[i] = dy[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * dt);
  }
}

namespace {

// Causal attention in row blocks of kCausalBlock queries: block [i0, i1)
// attends to keys [0, i1) only, so the score and value products skip the
// masked upper blocks (with seq = 4 blocks, 10 of 16 block products are
// computed). Without a mask: one block of every row.
constexpr int kCausalBlock = 32;

int BlockRows(bool causal, int seq) { return causal ? std::min(kCausalBlock, seq) : seq; }

// An operand of attention's products: its floats (row stride ld) and, in
// bfloat16, the same rounded once (row stride ld16) for every product that
// reads it (a head's keys and values, for every block of queries).
struct Operand {
  const float* f;
  int ld;
  const Bf16* h = nullptr;
  int ld16 = 0;
  Operand At(int64_t row, int col) const {
    return Operand{f == nullptr ? nullptr : f + row * ld + col, ld, h == nullptr ? nullptr : h + row * ld16 + col,
                   ld16};
  }
};

// C = alpha op(A) op(B) + beta C in `precision`: the floats through Gemm
// in float32, the rounded operands through GemmBf16 in bfloat16 (the bits
// Gemm would give from the floats).
void Product(Precision precision, bool ta, bool tb, int m, int n, int k, float alpha, const Operand& a,
             const Operand& b, float beta, float* c, int ldc) {
  if (precision == Precision::kBfloat16) {
    GemmBf16(ta, tb, m, n, k, alpha, a.h, a.ld16, b.h, b.ld16, beta, c, ldc);
  } else {
    Gemm(precision, ta, tb, m, n, k, alpha, a.f, a.ld, b.f, b.ld, beta, c, ldc);
  }
}

// `rows` x `cols` floats (row stride ld) as an Operand, rounded into `buf`
// (row stride cols) in bfloat16.
Operand Rounded(Precision precision, const float* f, int rows, int cols, int ld, std::vector<Bf16>* buf) {
  if (precision != Precision::kBfloat16) return Operand{f, ld};
  return Operand{f, ld, RoundInto(f, rows, cols, ld, buf), cols};
}

// Sequence b of qkv [batch * seq, ld] as an Operand: as kept (float32, or
// already rounded), or rounded here into `buf`.
Operand Sequence(Precision precision, KeptInput qkv, int b, int seq, int ld, std::vector<Bf16>* buf) {
  const int64_t at = static_cast<int64_t>(b) * seq * ld;
  if (precision == Precision::kBfloat16 && qkv.h != nullptr) return Operand{nullptr, ld, qkv.h + at, ld};
  return Rounded(precision, qkv.f + at, seq, ld, ld, buf);
}

}  // namespace

void AttentionForward(Precision precision, const float* qkv, int batch, int seq, int d, int heads, bool causal,
                      float* probs, float* y) {
  AttentionForward(precision, KeptInput{qkv, nullptr}, batch, seq, d, heads, causal, probs, y);
}

void AttentionBackward(Precision precision, const float* dy, const float* qkv, const float* probs, int batch, int seq,
                       int d, int heads, bool causal, float* dqkv, float* scratch) {
  AttentionBackward(precision, dy, KeptInput{qkv, nullptr}, probs, batch, seq, d, heads, causal, dqkv, scratch);
}

SHARDLINE_VECTOR_CLONES void AttentionForward(Precision precision, KeptInput qkv, int batch, int seq, int d,
                                              int heads, bool causal, float* probs, float* y) {
  const int hd = d / heads;
  const int ld = 3 * d;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const int rows_per_block = BlockRows(causal, seq);
  RoundedScratch& scratch = Scratch();
  for (int b = 0; b < batch; ++b) {
    const Operand base = Sequence(precision, qkv, b, seq, ld, &scratch.qkv);
    for (int h = 0; h < heads; ++h) {
      const Operand q = base.At(0, h * hd), k = base.At(0, d + h * hd), v = base.At(0, 2 * d + h * hd);
      float* p = probs + (static_cast<int64_t>(b) * heads + h) * seq * seq;
      float* out = y + static_cast<int64_t>(b) * seq * d + h * hd;
      for (int i0 = 0; i0 < seq; i0 += rows_per_block) {
        const int i1 = std::min(seq, i0 + rows_per_block);
        const int keys = causal ? i1 : seq;  // the block's rows attend to keys [0, keys)
        float* pb = p + static_cast<int64_t>(i0) * seq;
        Product(precision, false, true, i1 - i0, keys, hd, scale, q.At(i0, 0), k, 0.0f, pb, seq);
        for (int i = i0; i < i1; ++i) {
          float* row = p + static_cast<int64_t>(i) * seq;
          const int last = causal ? i : seq - 1;  // the last position attended to
          // The maximum in four lanes: exact in any order, and four chains.
          float lane_max[4];
          std::fill(lane_max, lane_max + 4, -std::numeric_limits<float>::infinity());
          int j = 0;
          for (; j + 4 <= last + 1; j += 4) {
            for (int k = 0; k < 4; ++k) lane_max[k] = std::max(lane_max[k], row[j + k]);
          }
          for (; j <= last; ++j) lane_max[0] = std::max(lane_max[0], row[j]);
          const float max = std::max(std::max(lane_max[0], lane_max[1]), std::max(lane_max[2], lane_max[3]));
          float sum = 0;
          for (int c = 0; c <= last; ++c) {
            row[c] = std::exp(row[c] - max);
            sum += row[c];
          }
          const float inv = 1.0f / sum;
          for (int c = 0; c <= last; ++c) row[c] *= inv;
          for (int c = last + 1; c < seq; ++c) row[c] = 0.0f;
        }
        const Operand pr = Rounded(precision, pb, i1 - i0, keys, seq, &scratch.block);
        Product(precision, false, false, i1 - i0, hd, keys, 1.0f, pr, v, 0.0f, out + static_cast<int64_t>(i0) * d, d);
      }
    }
  }
}

SHARDLINE_VECTOR_CLONES void AttentionBackward(Precision precision, const float* dy, KeptInput qkv, const float* probs,
                                               int batch, int seq, int d, int heads,
                       bool causal, float* dqkv, float* scratch) {
  const int hd = d / heads;
  const int ld = 3 * d;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const int rows_per_block = BlockRows(causal, seq);
  RoundedScratch& rounded = Scratch();
  for (int b = 0; b < batch; ++b) {
    const Operand base = Sequence(precision, qkv, b, seq, ld, &rounded.qkv);
    const Operand dys = Rounded(precision, dy + static_cast<int64_t>(b) * seq * d, seq, d, d, &rounded.dy);
    float* dbase = dqkv + static_cast<int64_t>(b) * seq * ld;
    for (int h = 0; h < heads; ++h) {
      const Operand q = base.At(0, h * hd), k = base.At(0, d + h * hd), v = base.At(0, 2 * d + h * hd);
      const float* p = probs + (static_cast<int64_t>(b) * heads + h) * seq * seq;
      const Operand dout = dys.At(0, h * hd);
      float* dq = dbase + h * hd;
      float* dk = dbase + d + h * hd;
      float* dv = dbase + 2 * d + h * hd;
      // The last block first: it reaches every key, so its products
      // initialise all of dV and dK (beta 0) and the others add to them.
      const int last_block = (seq - 1) / rows_per_block * rows_per_block;
      for (int i0 = last_block; i0 >= 0; i0 -= rows_per_block) {
        const int i1 = std::min(seq, i0 + rows_per_block);
        const int keys = causal ? i1 : seq;
        const int rows = i1 - i0;
        const float beta = i0 == last_block ? 0.0f : 1.0f;
        const Operand pb = Rounded(precision, p + static_cast<int64_t>(i0) * seq, rows, keys, seq, &rounded.block);
        const Operand doutb = dout.At(i0, 0);
        float* ds = scratch + static_cast<int64_t>(i0) * seq;
        // dP = dO V^T; dV (+)= P^T dO.
        Product(precision, false, true, rows, keys, hd, 1.0f, doutb, v, 0.0f, ds, seq);
        Product(precision, true, false, keys, hd, rows, 1.0f, pb, doutb, beta, dv, ld);
        // Through the softmax: dS = P * (dP - rowsum(dP * P)); zero where masked.
        for (int i = i0; i < i1; ++i) {
          const float* pr = p + static_cast<int64_t>(i) * seq;
          float* dr = scratch + static_cast<int64_t>(i) * seq;
          float dot = 0;
          for (int j = 0; j < keys; ++j) dot += dr[j] * pr[j];
          for (int j = 0; j < keys; ++j) dr[j] = pr[j] * (dr[j] - dot);
        }
        // dQ = scale dS K; dK (+)= scale dS^T Q.
        const Operand dsb = Rounded(precision, ds, rows, keys, seq, &rounded.block);
        Product(precision, false, false, rows, hd, keys, scale, dsb, k, 0.0f, dq + static_cast<int64_t>(i0) * ld, ld);
        Product(precision, true, false, keys, hd, rows, scale, dsb, q.At(i0, 0), beta, dk, ld);
      }
    }
  }
}

void EmbeddingForward(const int32_t* tokens, const float* wte, const float* wpe, int batch, int seq, int d, float* x) {
  for (int b = 0; b < batch; ++b) {
    for (int t = 0; t < seq; ++t) {
      const int64_t r = static_cast<int64_t>(b) * seq + t;
      const float* e = wte + static_cast<int64_t>(tokens[r]) * d;
      const float* p = wpe + static_cast<int64_t>(t) * d;
      float* xr = x + r * d;
      for (int i = 0; i < d; ++i) xr[i] = e[i] + p[i];
    }
  }
}

void EmbeddingBackward(const float* dx, const int32_t* tokens, int batch, int seq, int d, bool accumulate_wpe,
                       float* dwte, float* dwpe) {
  if (!accumulate_wpe) std::fill(dwpe, dwpe + static_cast<int64_t>(seq) * d, 0.0f);
  for (int b = 0; b < batch; ++b) {
    for (int t = 0; t < seq; ++t) {
      const int64_t r = static_cast<int64_t>(b) * seq + t;
      const float* g = dx + r * d;
      float* e = dwte + static_cast<int64_t>(tokens[r]) * d;
      float* p = dwpe + static_cast<int64_t>(t) * d;
      for (int i = 0; i < d; ++i) {
        e[i] += g[i];
        p[i] += g[i];
      }
    }
  }
}

void AttentionForwardOne(Precision precision, const float* q_all, const float* keys, const float* values, int pos, int d, int heads,
                         float* scores, float* y) {
  const int hd = d / heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  // In bfloat16 the products read their operands rounded, as Gemm's do.
  const bool bf16 = precision == Precision::kBfloat16;
  const auto in = [bf16](float x) { return bf16 ? Bf16ToFloat(FloatToBf16(x)) : x; };
  for (int h = 0; h < heads; ++h) {
    const float* q = q_all + h * hd;
    float max = -std::numeric_limits<float>::infinity();
    for (int j = 0; j <= pos; ++j) {
      const float* k = keys + static_cast<int64_t>(j) * d + h * hd;
      float s = 0;
      for (int i = 0; i < hd; ++i) s += in(q[i]) * in(k[i]);
      scores[j] = s * scale;
      max = std::max(max, scores[j]);
    }
    float sum = 0;
    for (int j = 0; j <= pos; ++j) {
      scores[j] = std::exp(scores[j] - max);
      sum += scores[j];
    }
    float* out = y + h * hd;
    std::fill(out, out + hd, 0.0f);
    for (int j = 0; j <= pos; ++j) {
      const float pj = in(scores[j] / sum);
      const float* v = values + static_cast<int64_t>(j) * d + h * hd;
      for (int i = 0; i < hd; ++i) out[i] += pj * in(v[i]);
    }
  }
}

}  // namespace shardline
