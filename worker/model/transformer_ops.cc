#include "worker/model/transformer_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "worker/model/gemm.h"

namespace shardline {

void LayerNormForward(const float* x, const float* gamma, const float* beta, int rows, int d, float* y,
                      float* mean, float* rstd) {
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + static_cast<int64_t>(r) * d;
    float* yr = y + static_cast<int64_t>(r) * d;
    double sum = 0;
    for (int i = 0; i < d; ++i) sum += xr[i];
    const float m = static_cast<float>(sum / d);
    double sq = 0;
    for (int i = 0; i < d; ++i) {
      const double c = static_cast<double>(xr[i]) - m;
      sq += c * c;
    }
    const float s = static_cast<float>(1.0 / std::sqrt(sq / d + kLayerNormEps));
    for (int i = 0; i < d; ++i) yr[i] = (xr[i] - m) * s * gamma[i] + beta[i];
    mean[r] = m;
    rstd[r] = s;
  }
}

void LayerNormBackward(const float* dy, const float* x, const float* mean, const float* rstd, const float* gamma,
                       int rows, int d, bool accumulate, float* dx, float* dgamma, float* dbeta) {
  if (!accumulate) {
    std::fill(dgamma, dgamma + d, 0.0f);
    std::fill(dbeta, dbeta + d, 0.0f);
  }
  for (int r = 0; r < rows; ++r) {
    const float* dyr = dy + static_cast<int64_t>(r) * d;
    const float* xr = x + static_cast<int64_t>(r) * d;
    float* dxr = dx + static_cast<int64_t>(r) * d;
    const float m = mean[r], s = rstd[r];
    // dxhat = dy * gamma; dx = s * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)).
    double sum_dxhat = 0, sum_dxhat_xhat = 0;
    for (int i = 0; i < d; ++i) {
      const float xhat = (xr[i] - m) * s;
      const float dxhat = dyr[i] * gamma[i];
      sum_dxhat += dxhat;
      sum_dxhat_xhat += static_cast<double>(dxhat) * xhat;
      dgamma[i] += dyr[i] * xhat;
      dbeta[i] += dyr[i];
    }
    const float a = static_cast<float>(sum_dxhat / d), b = static_cast<float>(sum_dxhat_xhat / d);
    for (int i = 0; i < d; ++i) {
      const float xhat = (xr[i] - m) * s;
      dxr[i] = s * (dyr[i] * gamma[i] - a - xhat * b);
    }
  }
}

void LinearForward(const float* x, const float* w, const float* b, int rows, int in, int out, float* y) {
  if (b != nullptr) {
    for (int r = 0; r < rows; ++r) std::memcpy(y + static_cast<int64_t>(r) * out, b, sizeof(float) * out);
  }
  Sgemm(false, true, rows, out, in, 1.0f, x, in, w, in, b != nullptr ? 1.0f : 0.0f, y, out);
}

void LinearBackward(const float* dy, const float* x, const float* w, int rows, int in, int out, bool accumulate,
                    float* dx, float* dw, float* db) {
  if (dx != nullptr) Sgemm(false, false, rows, in, out, 1.0f, dy, out, w, in, 0.0f, dx, in);
  Sgemm(true, false, out, in, rows, 1.0f, dy, out, x, in, accumulate ? 1.0f : 0.0f, dw, in);
  if (db == nullptr) return;
  if (!accumulate) std::fill(db, db + out, 0.0f);
  for (int r = 0; r < rows; ++r) {
    const float* dyr = dy + static_cast<int64_t>(r) * out;
    for (int o = 0; o < out; ++o) db[o] += dyr[o];
  }
}

namespace {

constexpr float kGeluK = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluC = 0.044715f;

}  // namespace

void GeluForward(const float* x, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = 0.5f * v * (1.0f + FastTanh(kGeluK * (v + kGeluC * v * v * v)));
  }
}

void GeluBackward(const float* dy, const float* x, int64_t n, float* dx) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float t = FastTanh(kGeluK * (v + kGeluC * v * v * v));
    const float dt = kGeluK * (1.0f + 3.0f * kGeluC * v * v);
    dx[i] = dy[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * dt);
  }
}

void AttentionForward(const float* qkv, int batch, int seq, int d, int heads, bool causal, float* probs, float* y) {
  const int hd = d / heads;
  const int ld = 3 * d;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (int b = 0; b < batch; ++b) {
    const float* base = qkv + static_cast<int64_t>(b) * seq * ld;
    for (int h = 0; h < heads; ++h) {
      const float* q = base + h * hd;
      const float* k = q + d;
      const float* v = q + 2 * d;
      float* p = probs + (static_cast<int64_t>(b) * heads + h) * seq * seq;
      Sgemm(false, true, seq, seq, hd, scale, q, ld, k, ld, 0.0f, p, seq);
      for (int i = 0; i < seq; ++i) {
        float* row = p + static_cast<int64_t>(i) * seq;
        const int last = causal ? i : seq - 1;  // the last position attended to
        float max = -std::numeric_limits<float>::infinity();
        for (int j = 0; j <= last; ++j) max = std::max(max, row[j]);
        float sum = 0;
        for (int j = 0; j <= last; ++j) {
          row[j] = std::exp(row[j] - max);
          sum += row[j];
        }
        const float inv = 1.0f / sum;
        for (int j = 0; j <= last; ++j) row[j] *= inv;
        for (int j = last + 1; j < seq; ++j) row[j] = 0.0f;
      }
      Sgemm(false, false, seq, hd, seq, 1.0f, p, seq, v, ld, 0.0f, y + static_cast<int64_t>(b) * seq * d + h * hd, d);
    }
  }
}

void AttentionBackward(const float* dy, const float* qkv, const float* probs, int batch, int seq, int d, int heads,
                       float* dqkv, float* scratch) {
  const int hd = d / heads;
  const int ld = 3 * d;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (int b = 0; b < batch; ++b) {
    const float* base = qkv + static_cast<int64_t>(b) * seq * ld;
    float* dbase = dqkv + static_cast<int64_t>(b) * seq * ld;
    for (int h = 0; h < heads; ++h) {
      const float* q = base + h * hd;
      const float* k = q + d;
      const float* v = q + 2 * d;
      const float* p = probs + (static_cast<int64_t>(b) * heads + h) * seq * seq;
      const float* dout = dy + static_cast<int64_t>(b) * seq * d + h * hd;
      float* ds = scratch;
      // dP = dO V^T; dV = P^T dO.
      Sgemm(false, true, seq, seq, hd, 1.0f, dout, d, v, ld, 0.0f, ds, seq);
      Sgemm(true, false, seq, hd, seq, 1.0f, p, seq, dout, d, 0.0f, dbase + 2 * d + h * hd, ld);
      // Through the softmax: dS = P * (dP - rowsum(dP * P)); zero where masked.
      for (int i = 0; i < seq; ++i) {
        const float* pr = p + static_cast<int64_t>(i) * seq;
        float* dr = ds + static_cast<int64_t>(i) * seq;
        float dot = 0;
        for (int j = 0; j < seq; ++j) dot += dr[j] * pr[j];
        for (int j = 0; j < seq; ++j) dr[j] = pr[j] * (dr[j] - dot);
      }
      // dQ = scale dS K; dK = scale dS^T Q.
      Sgemm(false, false, seq, hd, seq, scale, ds, seq, k, ld, 0.0f, dbase + h * hd, ld);
      Sgemm(true, false, seq, hd, seq, scale, ds, seq, q, ld, 0.0f, dbase + d + h * hd, ld);
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

}  // namespace shardline
