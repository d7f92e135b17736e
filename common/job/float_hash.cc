#include "common/job/float_hash.h"

#include <cstring>

#include "common/platform/vector_clones.h"

namespace shardline {
namespace {

inline uint32_t Rotl(uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }

// MurmurHash3's block step: a bijection of h for a given word w, and an
// injection of w for a given h.
inline uint32_t Mix(uint32_t h, uint32_t w) {
  uint32_t k = w * 0xcc9e2d51u;
  k = Rotl(k, 15) * 0x1b873593u;
  h ^= k;
  return Rotl(h, 13) * 5u + 0xe6546b64u;
}

// Whole blocks of eight words into the eight lanes. Integer arithmetic: the
// copies give the same bits.
SHARDLINE_TARGET_CLONES("avx512f", "avx2", "default")
void MixBlocks(uint32_t* lanes, const uint32_t* words, int64_t blocks) {
  uint32_t l[8];
  std::memcpy(l, lanes, sizeof(l));
  for (int64_t b = 0; b < blocks; ++b) {
    for (int j = 0; j < 8; ++j) l[j] = Mix(l[j], words[b * 8 + j]);
  }
  std::memcpy(lanes, l, sizeof(l));
}

}  // namespace

void FloatHasher::Add(const float* values, int64_t n) {
  if (n <= 0) return;
  int64_t i = 0;
  auto word = [&](int64_t at) {
    uint32_t w;
    std::memcpy(&w, values + at, sizeof(w));
    return w;
  };
  // Up to the next lane-0 word one at a time; whole blocks at once; the rest.
  for (; i < n && count_ % kLanes != 0; ++i, ++count_) {
    lanes_[count_ % kLanes] = Mix(lanes_[count_ % kLanes], word(i));
  }
  const int64_t blocks = (n - i) / kLanes;
  if (blocks > 0) {
    static_assert(sizeof(float) == sizeof(uint32_t));
    MixBlocks(lanes_, reinterpret_cast<const uint32_t*>(values + i), blocks);
    i += blocks * kLanes;
    count_ += blocks * kLanes;
  }
  for (; i < n; ++i, ++count_) lanes_[count_ % kLanes] = Mix(lanes_[count_ % kLanes], word(i));
}

uint64_t FloatHasher::Digest() const {
  uint64_t acc = SplitMix64(static_cast<uint64_t>(count_));
  for (int j = 0; j < kLanes; ++j) acc = SplitMix64(acc + lanes_[j] + (static_cast<uint64_t>(j) << 32));
  return acc;
}

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t HashFloats(absl::Span<const float> values) {
  FloatHasher h;
  h.Add(values.data(), static_cast<int64_t>(values.size()));
  return h.Digest();
}

}  // namespace shardline
