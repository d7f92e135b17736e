#include "worker/model/pool.h"

#include <algorithm>
#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define SHARDLINE_POOL_AVX2 1
#include <immintrin.h>
#endif

namespace shardline {
namespace {

// One window at a time, branch-free (the winner is data-dependent, so
// branches mispredict half the time): the better of each row pair, then the
// better row; the right or lower value wins only when strictly larger.
void PoolWindows(const float* r0, const float* r1, int count, float* out, uint8_t* argmax) {
  for (int x = 0; x < count; ++x) {
    const float a = r0[2 * x], b = r0[2 * x + 1], c = r1[2 * x], d = r1[2 * x + 1];
    // std::max(p, q) is q only when p < q; comparisons as 0/1 integers.
    const float top = std::max(a, b), bottom = std::max(c, d);
    const int right0 = a < b, right1 = c < d, lower = top < bottom;
    out[x] = std::max(top, bottom);
    argmax[x] = static_cast<uint8_t>(right0 + lower * (2 + right1 - right0));
  }
}

void UnpoolWindows(const float* dout, const float* pooled, const uint8_t* argmax, int count, float* r0, float* r1) {
  for (int x = 0; x < count; ++x) {
    const float g = pooled[x] > 0.0f ? dout[x] : 0.0f;
    const int best = argmax[x];
    r0[2 * x] = best == 0 ? g : 0.0f;
    r0[2 * x + 1] = best == 1 ? g : 0.0f;
    r1[2 * x] = best == 2 ? g : 0.0f;
    r1[2 * x + 1] = best == 3 ? g : 0.0f;
  }
}

#ifdef SHARDLINE_POOL_AVX2
// The same selections as PoolWindows, lane by lane: blendv(p, q, p < q) is
// std::max(p, q) exactly (ties, signed zeros and NaNs included).
#define SHARDLINE_AVX2 __attribute__((target("avx2")))

// Windows [0, 8) from 16 floats of each row.
SHARDLINE_AVX2 inline void Pool8(const float* r0, const float* r1, float* out, uint8_t* argmax) {
  const __m256 t0 = _mm256_loadu_ps(r0), t1 = _mm256_loadu_ps(r0 + 8);
  const __m256 b0 = _mm256_loadu_ps(r1), b1 = _mm256_loadu_ps(r1 + 8);
  // Even and odd columns; lanes hold windows 0 1 4 5 | 2 3 6 7.
  const __m256 a = _mm256_shuffle_ps(t0, t1, _MM_SHUFFLE(2, 0, 2, 0));
  const __m256 b = _mm256_shuffle_ps(t0, t1, _MM_SHUFFLE(3, 1, 3, 1));
  const __m256 c = _mm256_shuffle_ps(b0, b1, _MM_SHUFFLE(2, 0, 2, 0));
  const __m256 d = _mm256_shuffle_ps(b0, b1, _MM_SHUFFLE(3, 1, 3, 1));
  const __m256 right0 = _mm256_cmp_ps(a, b, _CMP_LT_OQ), right1 = _mm256_cmp_ps(c, d, _CMP_LT_OQ);
  const __m256 top = _mm256_blendv_ps(a, b, right0), bottom = _mm256_blendv_ps(c, d, right1);
  const __m256 lower = _mm256_cmp_ps(top, bottom, _CMP_LT_OQ);
  const __m256 best = _mm256_blendv_ps(top, bottom, lower);
  // Masks are -1 or 0: right0 is 0 - mask, 2 + right1 is 2 - mask.
  const __m256i upper_index = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_castps_si256(right0));
  const __m256i lower_index = _mm256_sub_epi32(_mm256_set1_epi32(2), _mm256_castps_si256(right1));
  __m256i index = _mm256_blendv_epi8(upper_index, lower_index, _mm256_castps_si256(lower));
  // Back to windows 0..7 (64-bit pairs 0 2 1 3).
  _mm256_storeu_ps(out, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(best), 0xD8)));
  index = _mm256_permute4x64_epi64(index, 0xD8);
  const __m128i words = _mm_packs_epi32(_mm256_castsi256_si128(index), _mm256_extracti128_si256(index, 1));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(argmax), _mm_packus_epi16(words, words));
}

// Windows [0, 4) from 8 floats of each row.
SHARDLINE_AVX2 inline void Pool4(const float* r0, const float* r1, float* out, uint8_t* argmax) {
  const __m128 t0 = _mm_loadu_ps(r0), t1 = _mm_loadu_ps(r0 + 4);
  const __m128 b0 = _mm_loadu_ps(r1), b1 = _mm_loadu_ps(r1 + 4);
  const __m128 a = _mm_shuffle_ps(t0, t1, _MM_SHUFFLE(2, 0, 2, 0));
  const __m128 b = _mm_shuffle_ps(t0, t1, _MM_SHUFFLE(3, 1, 3, 1));
  const __m128 c = _mm_shuffle_ps(b0, b1, _MM_SHUFFLE(2, 0, 2, 0));
  const __m128 d = _mm_shuffle_ps(b0, b1, _MM_SHUFFLE(3, 1, 3, 1));
  const __m128 right0 = _mm_cmplt_ps(a, b), right1 = _mm_cmplt_ps(c, d);
  const __m128 top = _mm_blendv_ps(a, b, right0), bottom = _mm_blendv_ps(c, d, right1);
  const __m128 lower = _mm_cmplt_ps(top, bottom);
  _mm_storeu_ps(out, _mm_blendv_ps(top, bottom, lower));
  const __m128i upper_index = _mm_sub_epi32(_mm_setzero_si128(), _mm_castps_si128(right0));
  const __m128i lower_index = _mm_sub_epi32(_mm_set1_epi32(2), _mm_castps_si128(right1));
  const __m128i index = _mm_blendv_epi8(upper_index, lower_index, _mm_castps_si128(lower));
  const __m128i words = _mm_packs_epi32(index, index);
  const int bytes = _mm_cvtsi128_si32(_mm_packus_epi16(words, words));
  std::memcpy(argmax, &bytes, sizeof(bytes));
}

// Windows [0, 8): 16 floats of each row, +0 but at each winner.
SHARDLINE_AVX2 inline void Unpool8(const float* dout, const float* pooled, const uint8_t* argmax, float* r0,
                                   float* r1) {
  const __m256 passed = _mm256_cmp_ps(_mm256_loadu_ps(pooled), _mm256_setzero_ps(), _CMP_GT_OQ);
  const __m256 g = _mm256_and_ps(_mm256_loadu_ps(dout), passed);
  const __m256i index = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(argmax)));
  __m256 at[4];
  for (int k = 0; k < 4; ++k) {
    at[k] = _mm256_and_ps(g, _mm256_castsi256_ps(_mm256_cmpeq_epi32(index, _mm256_set1_epi32(k))));
  }
  // Interleave (at[0], at[1]) into the top row and (at[2], at[3]) into the
  // bottom: unpack gives windows 0 1 | 4 5 and 2 3 | 6 7 per 128-bit half.
  for (int row = 0; row < 2; ++row) {
    const __m256 lo = _mm256_unpacklo_ps(at[2 * row], at[2 * row + 1]);
    const __m256 hi = _mm256_unpackhi_ps(at[2 * row], at[2 * row + 1]);
    float* dst = row == 0 ? r0 : r1;
    _mm256_storeu_ps(dst, _mm256_permute2f128_ps(lo, hi, 0x20));
    _mm256_storeu_ps(dst + 8, _mm256_permute2f128_ps(lo, hi, 0x31));
  }
}

// Windows [0, 4): 8 floats of each row.
SHARDLINE_AVX2 inline void Unpool4(const float* dout, const float* pooled, const uint8_t* argmax, float* r0,
                                   float* r1) {
  const __m128 passed = _mm_cmpgt_ps(_mm_loadu_ps(pooled), _mm_setzero_ps());
  const __m128 g = _mm_and_ps(_mm_loadu_ps(dout), passed);
  int bytes;
  std::memcpy(&bytes, argmax, sizeof(bytes));
  const __m128i index = _mm_cvtepu8_epi32(_mm_cvtsi32_si128(bytes));
  __m128 at[4];
  for (int k = 0; k < 4; ++k) at[k] = _mm_and_ps(g, _mm_castsi128_ps(_mm_cmpeq_epi32(index, _mm_set1_epi32(k))));
  _mm_storeu_ps(r0, _mm_unpacklo_ps(at[0], at[1]));
  _mm_storeu_ps(r0 + 4, _mm_unpackhi_ps(at[0], at[1]));
  _mm_storeu_ps(r1, _mm_unpacklo_ps(at[2], at[3]));
  _mm_storeu_ps(r1 + 4, _mm_unpackhi_ps(at[2], at[3]));
}

// A row of `windows` >= 4 windows as vectors of 8 (or 4), the last one
// ending at the row's end. Overlapping vectors recompute the same windows
// and store the same values, so no window is done one at a time.
template <int kWide, typename F>
SHARDLINE_AVX2 inline void VectorRow(int windows, F f) {
  int x = 0;
  for (; x + kWide <= windows; x += kWide) f(x);
  if (x < windows) f(windows - kWide);
}

SHARDLINE_AVX2 void MaxPoolAvx2(int64_t pairs, int w, const float* in, float* out, uint8_t* argmax) {
  const int ow = w / 2;
  for (int64_t p = 0; p < pairs; ++p, in += 2 * w, out += ow, argmax += ow) {
    const float* r1 = in + w;
    if (ow >= 8) {
      VectorRow<8>(ow, [&](int x) SHARDLINE_AVX2 { Pool8(in + 2 * x, r1 + 2 * x, out + x, argmax + x); });
    } else {
      VectorRow<4>(ow, [&](int x) SHARDLINE_AVX2 { Pool4(in + 2 * x, r1 + 2 * x, out + x, argmax + x); });
    }
  }
}

SHARDLINE_AVX2 void UnpoolAvx2(int64_t pairs, int w, const float* dout, const float* pooled, const uint8_t* argmax,
                               float* din) {
  const int ow = w / 2;
  for (int64_t p = 0; p < pairs; ++p, dout += ow, pooled += ow, argmax += ow, din += 2 * w) {
    float* r1 = din + w;
    if (ow >= 8) {
      VectorRow<8>(ow, [&](int x) SHARDLINE_AVX2 {
        Unpool8(dout + x, pooled + x, argmax + x, din + 2 * x, r1 + 2 * x);
      });
    } else {
      VectorRow<4>(ow, [&](int x) SHARDLINE_AVX2 {
        Unpool4(dout + x, pooled + x, argmax + x, din + 2 * x, r1 + 2 * x);
      });
    }
  }
}

bool UseAvx2(int w) {
  static const bool have = __builtin_cpu_supports("avx2");
  return have && w / 2 >= 4;
}
#endif  // SHARDLINE_POOL_AVX2

}  // namespace

// A plane of h x w is h/2 row pairs of 2w floats, each giving w/2 outputs,
// and the planes follow one another: all `planes * h/2` pairs alike.
void MaxPool2x2(int64_t planes, int h, int w, const float* in, float* out, uint8_t* argmax) {
  const int64_t pairs = planes * (h / 2);
  const int ow = w / 2;
#ifdef SHARDLINE_POOL_AVX2
  if (UseAvx2(w)) return MaxPoolAvx2(pairs, w, in, out, argmax);
#endif
  for (int64_t p = 0; p < pairs; ++p, in += 2 * w, out += ow, argmax += ow) PoolWindows(in, in + w, ow, out, argmax);
}

void ReluMaxPool2x2Backward(int64_t planes, int h, int w, const float* dout, const float* pooled,
                            const uint8_t* argmax, float* din) {
  const int64_t pairs = planes * (h / 2);
  const int ow = w / 2;
#ifdef SHARDLINE_POOL_AVX2
  if (UseAvx2(w)) return UnpoolAvx2(pairs, w, dout, pooled, argmax, din);
#endif
  for (int64_t p = 0; p < pairs; ++p, dout += ow, pooled += ow, argmax += ow, din += 2 * w) {
    UnpoolWindows(dout, pooled, argmax, ow, din, din + w);
  }
}

}  // namespace shardline
