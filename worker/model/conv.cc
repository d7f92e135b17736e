#include "worker/model/conv.h"

#include <algorithm>
#include <cstring>

#include "common/platform/vector_clones.h"

namespace shardline {

// The kernels below are elementwise (copies, comparisons, selects, adds in a
// fixed order per element), so a wider vector unit gives bitwise the same
// results: they are built for AVX2 as well as the baseline and the CPU
// picks at load time (vector_clones.h says where). (Reductions keep an
// explicit lane order: RowSums.)
#define SHARDLINE_VECTOR_CLONES SHARDLINE_TARGET_CLONES("avx2", "default")

int ConvChunk(const ConvGeometry& g, int batch) {
  constexpr int64_t kChunkFloats = 256 * 1024;
  const int64_t per_image = std::max<int64_t>(1, std::max<int64_t>(g.col_rows(), g.out_channels) * g.pixels());
  return static_cast<int>(std::clamp<int64_t>(kChunkFloats / per_image, 1, std::max(batch, 1)));
}

SHARDLINE_VECTOR_CLONES void PadImages(const ConvGeometry& g, int batch, const float* in, float* padded) {
  const int h = g.height, w = g.width, p = g.pad(), pw = g.padded_width();
  const int64_t images = static_cast<int64_t>(g.in_channels) * batch;
  std::fill(padded, padded + images * g.padded_pixels(), 0.0f);
  for (int64_t q = 0; q < images; ++q) {
    const float* src = in + q * g.pixels();
    float* dst = padded + q * g.padded_pixels() + p * pw + p;
    for (int y = 0; y < h; ++y) {
      for (int x = 0; x < w; ++x) dst[static_cast<int64_t>(y) * pw + x] = src[static_cast<int64_t>(y) * w + x];
    }
  }
}

SHARDLINE_VECTOR_CLONES void UnpadImages(const ConvGeometry& g, int batch, const float* padded, float* out) {
  const int h = g.height, w = g.width, p = g.pad(), pw = g.padded_width();
  const int64_t images = static_cast<int64_t>(g.in_channels) * batch;
  for (int64_t q = 0; q < images; ++q) {
    const float* src = padded + q * g.padded_pixels() + p * pw + p;
    float* dst = out + q * g.pixels();
    for (int y = 0; y < h; ++y) {
      for (int x = 0; x < w; ++x) dst[static_cast<int64_t>(y) * w + x] = src[static_cast<int64_t>(y) * pw + x];
    }
  }
}

SHARDLINE_VECTOR_CLONES void Im2Col(const ConvGeometry& g, int batch, int first, int count, const float* padded, float* cols) {
  const int h = g.height, w = g.width, k = g.kernel, pw = g.padded_width();
  const int64_t plane = g.padded_pixels();
  float* dst = cols;
  for (int c = 0; c < g.in_channels; ++c) {
    const float* channel = padded + (static_cast<int64_t>(c) * batch + first) * plane;
    for (int i = 0; i < k; ++i) {
      for (int j = 0; j < k; ++j) {
        for (int b = 0; b < count; ++b) {
          const float* src = channel + b * plane + static_cast<int64_t>(i) * pw + j;
          for (int y = 0; y < h; ++y, dst += w, src += pw) {
            for (int x = 0; x < w; ++x) dst[x] = src[x];
          }
        }
      }
    }
  }
}

SHARDLINE_VECTOR_CLONES void Col2Im(const ConvGeometry& g, int batch, int first, int count, const float* cols, float* dpadded) {
  const int h = g.height, w = g.width, k = g.kernel, pw = g.padded_width();
  const int64_t plane = g.padded_pixels();
  const float* src = cols;
  for (int c = 0; c < g.in_channels; ++c) {
    float* channel = dpadded + (static_cast<int64_t>(c) * batch + first) * plane;
    for (int i = 0; i < k; ++i) {
      for (int j = 0; j < k; ++j) {
        for (int b = 0; b < count; ++b) {
          float* dst = channel + b * plane + static_cast<int64_t>(i) * pw + j;
          for (int y = 0; y < h; ++y, src += w, dst += pw) {
            for (int x = 0; x < w; ++x) dst[x] += src[x];
          }
        }
      }
    }
  }
}

SHARDLINE_VECTOR_CLONES void RowSums(int rows, int64_t len, const float* in, bool accumulate, float* out) {
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
