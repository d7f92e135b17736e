#include "common/encoding/crc32c.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace shardline {
namespace {

// Test vectors from RFC 3720 (iSCSI), as LevelDB's crc32c_test uses them.
TEST(Crc32cTest, StandardResults) {
  char buf[32];
  std::memset(buf, 0, sizeof(buf));
  EXPECT_EQ(crc32c::Value(buf, sizeof(buf)), 0x8a9136aau);
  std::memset(buf, 0xff, sizeof(buf));
  EXPECT_EQ(crc32c::Value(buf, sizeof(buf)), 0x62a8ab43u);
  for (int i = 0; i < 32; ++i) buf[i] = static_cast<char>(i);
  EXPECT_EQ(crc32c::Value(buf, sizeof(buf)), 0x46dd794eu);
  for (int i = 0; i < 32; ++i) buf[i] = static_cast<char>(31 - i);
  EXPECT_EQ(crc32c::Value(buf, sizeof(buf)), 0x113fdb5cu);
  EXPECT_EQ(crc32c::Value("123456789", 9), 0xe3069283u);
}

TEST(Crc32cTest, ExtendEqualsValueOfTheConcatenation) {
  std::string data;
  for (int i = 0; i < 1000; ++i) data.push_back(static_cast<char>(i * 7));
  for (size_t cut : {0u, 1u, 7u, 8u, 9u, 500u, 999u, 1000u}) {
    EXPECT_EQ(crc32c::Extend(crc32c::Value(data.data(), cut), data.data() + cut, data.size() - cut),
              crc32c::Value(data.data(), data.size()))
        << cut;
  }
}

// The hardware path cuts long inputs into interleaved streams: it must give
// the table-driven result for every length and alignment around its cuts.
TEST(Crc32cTest, FastPathMatchesPortableAtEveryCut) {
  std::vector<uint8_t> data(3 * 8192 * 2 + 3 * 256 * 3 + 64);
  uint32_t x = 12345;
  for (uint8_t& b : data) b = static_cast<uint8_t>((x = x * 1103515245u + 12345u) >> 24);
  for (size_t offset : {0u, 1u, 3u, 8u}) {
    for (size_t n : {0u, 7u, 8u, 767u, 768u, 769u, 24575u, 24576u, 24577u, 24576u + 768u + 9u,
                     static_cast<unsigned>(data.size() - 8)}) {
      ASSERT_EQ(crc32c::Extend(0x1234u, data.data() + offset, n),
                crc32c::ExtendPortableForTest(0x1234u, data.data() + offset, n))
          << "offset " << offset << " length " << n;
    }
  }
}

TEST(Crc32cTest, MaskRoundTripsAndChangesTheValue) {
  const uint32_t crc = crc32c::Value("foo", 3);
  EXPECT_NE(crc32c::Mask(crc), crc);
  EXPECT_NE(crc32c::Mask(crc32c::Mask(crc)), crc);
  EXPECT_EQ(crc32c::Unmask(crc32c::Mask(crc)), crc);
  EXPECT_EQ(crc32c::Unmask(crc32c::Unmask(crc32c::Mask(crc32c::Mask(crc)))), crc);
}

}  // namespace
}  // namespace shardline
