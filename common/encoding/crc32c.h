// CRC32C (Castagnoli), the checksum of checkpoint shards, with LevelDB's
// masking for CRCs stored next to the data they cover.
//
//   uint32_t crc = crc32c::Value(data, n);
//   crc = crc32c::Extend(crc, more, m);       // == Value of the concatenation
//   uint32_t stored = crc32c::Mask(crc);
#ifndef SHARDLINE_COMMON_ENCODING_CRC32C_H_
#define SHARDLINE_COMMON_ENCODING_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace shardline {
namespace crc32c {

// The CRC32C of data[0, n) continuing from `crc` (the CRC of what came
// before; 0 for nothing). Uses the SSE4.2 instruction when the CPU has it.
uint32_t Extend(uint32_t crc, const void* data, size_t n);

// Extend without the SSE4.2 instruction, so tests can compare the two.
uint32_t ExtendPortableForTest(uint32_t crc, const void* data, size_t n);

inline uint32_t Value(const void* data, size_t n) { return Extend(0, data, n); }

inline uint32_t Mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

inline uint32_t Unmask(uint32_t masked) {
  const uint32_t rot = masked - 0xa282ead8u;
  return (rot >> 17) | (rot << 15);
}

}  // namespace crc32c
}  // namespace shardline

#endif  // SHARDLINE_COMMON_ENCODING_CRC32C_H_
