// Writes what an R lazy-load database holds (worker/data/rdata.h), for tests:
// a character vector in R's XDR serialisation, and a record of it.
#ifndef SHARDLINE_TESTS_WORKER_DATA_RDATA_WRITER_H_
#define SHARDLINE_TESTS_WORKER_DATA_RDATA_WRITER_H_

#include <zlib.h>

#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace shardline {

inline void PutInt(std::string* out, int32_t v) {
  const uint32_t u = static_cast<uint32_t>(v);
  for (int shift : {24, 16, 8, 0}) out->push_back(static_cast<char>((u >> shift) & 0xff));
}

// R's format-3 XDR serialisation of a character vector; nullptr is NA.
inline std::string SerializeStrings(const std::vector<const char*>& strings, int32_t type = 16) {
  std::string out = "X\n";
  PutInt(&out, 3);
  PutInt(&out, 0x40201);
  PutInt(&out, 0x30500);
  PutInt(&out, 5);
  out += "UTF-8";
  PutInt(&out, type);
  PutInt(&out, static_cast<int32_t>(strings.size()));
  for (const char* s : strings) {
    PutInt(&out, 0x40009);  // CHARSXP, UTF-8 flag
    if (s == nullptr) {
      PutInt(&out, -1);
      continue;
    }
    PutInt(&out, static_cast<int32_t>(std::string(s).size()));
    out += s;
  }
  return out;
}

// One record: the stated length, then the zlib stream.
inline std::string Record(const std::string& bytes, int32_t stated = -2) {
  uLongf n = compressBound(bytes.size());
  std::string z(n, '\0');
  EXPECT_EQ(compress2(reinterpret_cast<Bytef*>(z.data()), &n, reinterpret_cast<const Bytef*>(bytes.data()),
                      bytes.size(), 6),
            Z_OK);
  z.resize(n);
  std::string out;
  PutInt(&out, stated == -2 ? static_cast<int32_t>(bytes.size()) : stated);
  return out + z;
}

}  // namespace shardline

#endif  // SHARDLINE_TESTS_WORKER_DATA_RDATA_WRITER_H_
