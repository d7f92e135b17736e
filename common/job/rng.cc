#include "common/job/rng.h"

namespace shardline {

std::array<uint32_t, 4> Philox4x32(std::array<uint32_t, 4> ctr,
                                   std::array<uint32_t, 2> key) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key[0] += kW0;
      key[1] += kW1;
    }
    const uint64_t p0 = static_cast<uint64_t>(kM0) * ctr[0];
    const uint64_t p1 = static_cast<uint64_t>(kM1) * ctr[2];
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    ctr = {hi1 ^ ctr[1] ^ key[0], lo1, hi0 ^ ctr[3] ^ key[1], lo0};
  }
  return ctr;
}

// Counter words: [block index, rank, step low 32, purpose:8 | step high 24].
RandomStream::RandomStream(uint64_t seed, Purpose purpose, uint64_t step, uint32_t rank)
    : key_{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)},
      rank_(rank),
      step_lo_(static_cast<uint32_t>(step)),
      purpose_step_hi_((static_cast<uint32_t>(purpose) << 24) |
                       (static_cast<uint32_t>(step >> 32) & 0xFFFFFFu)) {}

uint32_t RandomStream::Bits(uint64_t index) const {
  const auto block = Philox4x32(
      {static_cast<uint32_t>(index >> 2), rank_, step_lo_, purpose_step_hi_}, key_);
  return block[index & 3];
}

uint64_t RandomStream::Bits64(uint64_t index) const {
  const auto block = Philox4x32(
      {static_cast<uint32_t>(index >> 1), rank_, step_lo_, purpose_step_hi_}, key_);
  const int half = static_cast<int>(index & 1) * 2;
  return (static_cast<uint64_t>(block[half]) << 32) | block[half + 1];
}

float RandomStream::Uniform(uint64_t index) const {
  return static_cast<float>(Bits(index) >> 8) * (1.0f / 16777216.0f);
}

uint64_t RandomStream::UniformInt(uint64_t index, uint64_t bound) const {
  const unsigned __int128 product =
      static_cast<unsigned __int128>(Bits64(index)) * bound;
  return static_cast<uint64_t>(product >> 64);
}

}  // namespace shardline
