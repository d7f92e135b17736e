// Fixed-width little-endian integers in byte strings (TFRecord framing, the
// trailers of inflated data copies).
#ifndef SHARDLINE_COMMON_ENCODING_CODING_H_
#define SHARDLINE_COMMON_ENCODING_CODING_H_

#include <cstdint>
#include <string>

namespace shardline {

// Appends the low `bytes` bytes of v, least significant first.
inline void AppendLittleEndian(std::string* out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// The `bytes`-byte little-endian integer at p.
inline uint64_t ReadLittleEndian(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t{static_cast<unsigned char>(p[i])} << (8 * i);
  return v;
}

}  // namespace shardline

#endif  // SHARDLINE_COMMON_ENCODING_CODING_H_
