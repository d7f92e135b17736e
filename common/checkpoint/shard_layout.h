// The byte layout shared by the shard writer (shard_write.cc) and reader
// (shard_read.cc): docs/checkpoint_format.md. Internal to common/checkpoint.
#ifndef SHARDLINE_COMMON_CHECKPOINT_SHARD_LAYOUT_H_
#define SHARDLINE_COMMON_CHECKPOINT_SHARD_LAYOUT_H_

#include <cstddef>
#include <cstdint>

namespace shardline {
namespace shard_layout {

inline constexpr char kMagic[8] = {'S', 'H', 'L', 'D', 'C', 'K', 'P', 'T'};
// 2: a shard holds pieces (ShardHeader.pieces). 1: one range [begin, end).
inline constexpr uint32_t kVersion = 2;
inline constexpr uint32_t kOneRangeVersion = 1;
inline constexpr size_t kPrefixBytes = 20;  // magic, version, header_len, header_crc

inline void PutU32(uint32_t v, char* out) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>(v >> (8 * i));
}

inline uint32_t GetU32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

}  // namespace shard_layout
}  // namespace shardline

#endif  // SHARDLINE_COMMON_CHECKPOINT_SHARD_LAYOUT_H_
