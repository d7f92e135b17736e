#include "worker/model/conv.h"

#include <algorithm>
#include <cstring>

namespace shardline {

namespace {

// The columns x of a row of width w where source x + dx lies inside [0, w).
struct Span1D {
  int begin;
  int end;
};
Span1D Inside(int w, int dx) { return Span1D{std::max(0, -dx), std::min(w, w - dx)}; }

}  // namespace

void Im2Col(const ConvGeometry& g, int n, const float* in, float* cols) {
  const int h = g.height, w = g.width, k = g.kernel, p = g.pad();
  const int64_t plane = g.pixels();
  const int64_t row_len = n * plane;
  float* dst = cols;
  for (int c = 0; c < g.in_channels; ++c) {
    const float* channel = in + c * row_len;
    for (int i = 0; i < k; ++i) {
      const int dy = i - p;
      for (int j = 0; j < k; ++j) {
        const int dx = j - p;
        const Span1D xs = Inside(w, dx);
        for (int b = 0; b < n; ++b) {
          const float* image = channel + b * plane;
          for (int y = 0; y < h; ++y, dst += w) {
            const int sy = y + dy;
            if (sy < 0 || sy >= h) {
              std::fill(dst, dst + w, 0.0f);
              continue;
            }
            const float* src = image + static_cast<int64_t>(sy) * w + dx;
            std::fill(dst, dst + xs.begin, 0.0f);
            std::memcpy(dst + xs.begin, src + xs.begin, sizeof(float) * static_cast<size_t>(xs.end - xs.begin));
            std::fill(dst + xs.end, dst + w, 0.0f);
          }
        }
      }
    }
  }
}

void Col2Im(const ConvGeometry& g, int n, const float* cols, float* din) {
  const int h = g.height, w = g.width, k = g.kernel, p = g.pad();
  const int64_t plane = g.pixels();
  const int64_t row_len = n * plane;
  const float* src = cols;
  for (int c = 0; c < g.in_channels; ++c) {
    float* channel = din + c * row_len;
    for (int i = 0; i < k; ++i) {
      const int dy = i - p;
      for (int j = 0; j < k; ++j) {
        const int dx = j - p;
        const Span1D xs = Inside(w, dx);
        for (int b = 0; b < n; ++b) {
          float* image = channel + b * plane;
          for (int y = 0; y < h; ++y, src += w) {
            const int sy = y + dy;
            if (sy < 0 || sy >= h) continue;
            float* dst = image + static_cast<int64_t>(sy) * w + dx;
            for (int x = xs.begin; x < xs.end; ++x) dst[x] += src[x];
          }
        }
      }
    }
  }
}

void MaxPool2x2(int64_t planes, int h, int w, const float* in, float* out, uint8_t* argmax) {
  // Branch-free (the winner is data-dependent, so branches mispredict half
  // the time): the better of each row pair, then the better row; the lower
  // row wins only when strictly larger, which keeps the first of equal values.
  const int oh = h / 2, ow = w / 2;
  for (int64_t q = 0; q < planes; ++q) {
    const float* plane = in + q * h * w;
    for (int y = 0; y < oh; ++y) {
      const float* r0 = plane + static_cast<int64_t>(2 * y) * w;
      const float* r1 = r0 + w;
      for (int x = 0; x < ow; ++x) {
        const float a = r0[2 * x], b = r0[2 * x + 1], c = r1[2 * x], d = r1[2 * x + 1];
        // std::max(p, q) is q only when p < q; comparisons as 0/1 integers.
        const float top = std::max(a, b), bottom = std::max(c, d);
        const int right0 = a < b, right1 = c < d, lower = top < bottom;
        out[x] = std::max(top, bottom);
        argmax[x] = static_cast<uint8_t>(right0 + lower * (2 + right1 - right0));
      }
      out += ow;
      argmax += ow;
    }
  }
}

void ReluMaxPool2x2Backward(int64_t planes, int h, int w, const float* dout, const float* pooled,
                            const uint8_t* argmax, float* din) {
  // Zero everything (one streaming fill), then one store per window.
  std::fill(din, din + planes * h * w, 0.0f);
  const int oh = h / 2, ow = w / 2;
  for (int64_t q = 0; q < planes; ++q) {
    float* plane = din + q * h * w;
    for (int y = 0; y < oh; ++y) {
      float* r0 = plane + static_cast<int64_t>(2 * y) * w;
      for (int x = 0; x < ow; ++x) {
        const int best = argmax[x];
        r0[(best >> 1) * w + 2 * x + (best & 1)] = pooled[x] > 0.0f ? dout[x] : 0.0f;
      }
      dout += ow;
      pooled += ow;
      argmax += ow;
    }
  }
}

void RowSums(int rows, int64_t len, const float* in, bool accumulate, float* out) {
  constexpr int kLanes = 8;
  for (int r = 0; r < rows; ++r) {
    const float* row = in + r * len;
    float lane[kLanes] = {};
    int64_t i = 0;
    for (; i + kLanes <= len; i += kLanes) {
      for (int j = 0; j < kLanes; ++j) lane[j] += row[i + j];
    }
    for (; i < len; ++i) lane[0] += row[i];
    const float sum = ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
    out[r] = accumulate ? out[r] + sum : sum;
  }
}

}  // namespace shardline
