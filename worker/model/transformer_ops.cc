#include "worker/model/transformer_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "common/encoding/bf16.h"
#include "common/platform/vector_clones.h"

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

void LinearForward(Products* p, const Matrix& x, const float* w, const float* b, int out, float* y) {
  const int rows = x.rows, in = x.cols;
  if (b != nullptr) {
    for (int r = 0; r < rows; ++r) std::memcpy(y + static_cast<int64_t>(r) * out, b, sizeof(float) * out);
  }
  p->Multiply(false, true, 1.0f, x, WeightOf(w, out, in), b != nullptr ? 1.0f : 0.0f, y, out);
}

void LinearBackward(Products* p, const float* dy, const Matrix& x, const float* w, int out, bool accumulate,
                    float* dx, float* dw, float* db) {
  const int rows = x.rows, in = x.cols;
  // dy rounded once for both products (BF16): the bits of rounding it for each.
  const Matrix dyr = p->Round(Floats(dy, rows, out), Slot::kOutputGrad);
  if (dx != nullptr) p->Multiply(false, false, 1.0f, dyr, WeightOf(w, out, in), 0.0f, dx, in);
  p->Multiply(true, false, 1.0f, dyr, x, accumulate ? 1.0f : 0.0f, dw, in);
  if (db == nullptr) return;
  if (!accumulate) std::fill(db, db + out, 0.0f);
  for (int r = 0; r < rows; ++r) {
    const float* dyr_f = dy + static_cast<int64_t>(r) * out;
    for (int o = 0; o < out; ++o) db[o] += dyr_f[o];
  }
}

void NoteLinearScratch(int rows, int in, int out, bool float_input, ProductScratch* scratch) {
  const int64_t r = rows;
  if (float_input) {
    scratch->Note(Slot::kA, r * in);  // the forward's x
    scratch->Note(Slot::kB, r * in);  // dw's
  }
  scratch->Note(Slot::kWeight, int64_t{out} * in);
  scratch->Note(Slot::kOutputGrad, r * out);
  scratch->NoteProduct(r * in, int64_t{out} * in);   // y = x W^T
  scratch->NoteProduct(r * out, int64_t{out} * in);  // dx = dy W
  scratch->NoteProduct(r * out, r * in);             // dW = dy^T x
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



}  // namespace

void NoteAttentionScratch(int seq, int d, int heads, bool causal, bool float_qkv, ProductScratch* scratch) {
  if (float_qkv) scratch->Note(Slot::kSequence, int64_t{seq} * 3 * d);
  scratch->Note(Slot::kOutputGrad, int64_t{seq} * d);
  const int64_t hd = d / heads;
  const int rows_per_block = BlockRows(causal, seq);
  for (int i0 = 0; i0 < seq; i0 += rows_per_block) {
    const int64_t rows = std::min(seq, i0 + rows_per_block) - i0;
    const int64_t keys = causal ? i0 + rows : seq;
    scratch->Note(Slot::kBlock, rows * keys);  // the block's probabilities, then dS
    // Q K^T, P V; dO V^T, P^T dO, dS K, dS^T Q (A and B as stored).
    scratch->NoteProduct(rows * hd, keys * hd);
    scratch->NoteProduct(rows * keys, keys * hd);
    scratch->NoteProduct(rows * keys, rows * hd);
  }
}

SHARDLINE_VECTOR_CLONES void AttentionForward(Products* p, const Matrix& qkv, int batch, int seq, int heads,
                                              bool causal, float* probs, float* y) {
  const int d = qkv.cols / 3;
  const int hd = d / heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const int rows_per_block = BlockRows(causal, seq);
  for (int b = 0; b < batch; ++b) {
    // The sequence as the products read it: rounded once for every head and block.
    const Matrix base = p->Round(qkv.Block(b * seq, 0, seq, 3 * d), Slot::kSequence);
    for (int h = 0; h < heads; ++h) {
      const Matrix q = base.Block(0, h * hd, seq, hd), k = base.Block(0, d + h * hd, seq, hd),
                   v = base.Block(0, 2 * d + h * hd, seq, hd);
      float* probs_bh = probs + (static_cast<int64_t>(b) * heads + h) * seq * seq;
      float* out = y + static_cast<int64_t>(b) * seq * d + h * hd;
      for (int i0 = 0; i0 < seq; i0 += rows_per_block) {
        const int i1 = std::min(seq, i0 + rows_per_block);
        const int rows = i1 - i0;
        const int keys = causal ? i1 : seq;  // the block's rows attend to keys [0, keys)
        float* pb = probs_bh + static_cast<int64_t>(i0) * seq;
        p->Multiply(false, true, scale, q.Block(i0, 0, rows, hd), k.Block(0, 0, keys, hd), 0.0f, pb, seq);
        for (int i = i0; i < i1; ++i) {
          float* row = probs_bh + static_cast<int64_t>(i) * seq;
          const int last = causal ? i : seq - 1;  // the last position attended to
          // The maximum in four lanes: exact in any order, and four chains.
          float lane_max[4];
          std::fill(lane_max, lane_max + 4, -std::numeric_limits<float>::infinity());
          int j = 0;
          for (; j + 4 <= last + 1; j += 4) {
            for (int c = 0; c < 4; ++c) lane_max[c] = std::max(lane_max[c], row[j + c]);
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
        const Matrix pr = p->Round(Floats(pb, rows, keys, seq), Slot::kBlock);
        p->Multiply(false, false, 1.0f, pr, v.Block(0, 0, keys, hd), 0.0f, out + static_cast<int64_t>(i0) * d, d);
      }
    }
  }
}

SHARDLINE_VECTOR_CLONES void AttentionBackward(Products* p, const float* dy, const Matrix& qkv, const float* probs,
                                               int batch, int seq, int heads, bool causal, float* dqkv,
                                               float* scratch) {
  const int d = qkv.cols / 3;
  const int hd = d / heads;
  const int ld = 3 * d;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const int rows_per_block = BlockRows(causal, seq);
  for (int b = 0; b < batch; ++b) {
    const Matrix base = p->Round(qkv.Block(b * seq, 0, seq, ld), Slot::kSequence);
    const Matrix dys = p->Round(Floats(dy + static_cast<int64_t>(b) * seq * d, seq, d), Slot::kOutputGrad);
    float* dbase = dqkv + static_cast<int64_t>(b) * seq * ld;
    for (int h = 0; h < heads; ++h) {
      const Matrix q = base.Block(0, h * hd, seq, hd), k = base.Block(0, d + h * hd, seq, hd),
                   v = base.Block(0, 2 * d + h * hd, seq, hd);
      const float* probs_bh = probs + (static_cast<int64_t>(b) * heads + h) * seq * seq;
      const Matrix dout = dys.Block(0, h * hd, seq, hd);
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
        const Matrix pb = p->Round(Floats(probs_bh + static_cast<int64_t>(i0) * seq, rows, keys, seq), Slot::kBlock);
        const Matrix doutb = dout.Block(i0, 0, rows, hd);
        float* ds = scratch + static_cast<int64_t>(i0) * seq;
        // dP = dO V^T; dV (+)= P^T dO.
        p->Multiply(false, true, 1.0f, doutb, v.Block(0, 0, keys, hd), 0.0f, ds, seq);
        p->Multiply(true, false, 1.0f, pb, doutb, beta, dv, ld);
        // Through the softmax: dS = P * (dP - rowsum(dP * P)); zero where masked.
        for (int i = i0; i < i1; ++i) {
          const float* pr = probs_bh + static_cast<int64_t>(i) * seq;
          float* dr = scratch + static_cast<int64_t>(i) * seq;
          float dot = 0;
          for (int j = 0; j < keys; ++j) dot += dr[j] * pr[j];
          for (int j = 0; j < keys; ++j) dr[j] = pr[j] * (dr[j] - dot);
        }
        // dQ = scale dS K; dK (+)= scale dS^T Q (the block's probabilities are no longer read).
        const Matrix dsb = p->Round(Floats(ds, rows, keys, seq), Slot::kBlock);
        p->Multiply(false, false, scale, dsb, k.Block(0, 0, keys, hd), 0.0f, dq + static_cast<int64_t>(i0) * ld, ld);
        p->Multiply(true, false, scale, dsb, q.Block(i0, 0, rows, hd), beta, dk, ld);
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

void AttentionForwardOne(const Products& p, const float* q_all, const float* keys, const float* values, int pos,
                         int d, int heads, float* scores, float* y) {
  const int hd = d / heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  // In bfloat16 the products read their operands rounded, as Products' do.
  const bool bf16 = p.bfloat16();
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
