// Counter-based random numbers (Philox4x32-10, Salmon et al. 2011). Every
// draw is a pure function of (seed, purpose, step, rank, index): nothing
// depends on call order, thread count or how work is split between workers,
// so a worker can initialise only its shard, and a resumed run draws exactly
// what an uninterrupted one would.
//
//   RandomStream init(seed, Purpose::kInit, /*step=*/tensor_index, /*rank=*/0);
//   float u = init.Uniform(element_index);   // in [0, 1)
#ifndef SHARDLINE_COMMON_JOB_RNG_H_
#define SHARDLINE_COMMON_JOB_RNG_H_

#include <array>
#include <cstdint>

namespace shardline {

// The Philox4x32-10 block function: 128-bit counter, 64-bit key.
std::array<uint32_t, 4> Philox4x32(std::array<uint32_t, 4> counter,
                                   std::array<uint32_t, 2> key);

// What a stream is used for; part of the counter so streams never collide.
enum class Purpose : uint32_t {
  kInit = 1,
  kShuffle = 2,
  kDropout = 3,  // reserved for stochastic layers
  kSample = 4,   // drawing generated text (gpt_sampler.h)
  kCanary = 5,   // the numerics canary's inputs (worker/train/numerics.h)
};

// One stream of 2^34 uint32 draws identified by (seed, purpose, step, rank).
// `step` must be < 2^56. Cheap to construct; copyable; thread-compatible.
class RandomStream {
 public:
  RandomStream(uint64_t seed, Purpose purpose, uint64_t step, uint32_t rank);

  // The index-th 32-bit draw of the stream.
  uint32_t Bits(uint64_t index) const;
  // The index-th 64-bit draw (uses draws 2*index and 2*index+1).
  uint64_t Bits64(uint64_t index) const;
  // Uniform in [0, 1) with 24 bits of precision.
  float Uniform(uint64_t index) const;
  // Uniform integer in [0, bound), bound > 0 (Lemire's multiply-shift on a
  // 64-bit draw; bias below 2^-32 for bounds up to 2^32).
  uint64_t UniformInt(uint64_t index, uint64_t bound) const;

 private:
  std::array<uint32_t, 2> key_;
  uint32_t rank_;
  uint32_t step_lo_;
  uint32_t purpose_step_hi_;
};

}  // namespace shardline

#endif  // SHARDLINE_COMMON_JOB_RNG_H_
