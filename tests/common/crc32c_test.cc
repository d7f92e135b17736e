#include "common/crc32c.h"

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

TEST(Crc32cTest, MaskRoundTripsAndChangesTheValue) {
  const uint32_t crc = crc32c::Value("foo", 3);
  EXPECT_NE(crc32c::Mask(crc), crc);
  EXPECT_NE(crc32c::Mask(crc32c::Mask(crc)), crc);
  EXPECT_EQ(crc32c::Unmask(crc32c::Mask(crc)), crc);
  EXPECT_EQ(crc32c::Unmask(crc32c::Unmask(crc32c::Mask(crc32c::Mask(crc)))), crc);
}

}  // namespace
}  // namespace shardline
