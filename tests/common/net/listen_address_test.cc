#include "common/net/listen_address.h"

#include <gtest/gtest.h>

namespace shardline {
namespace {

TEST(ListenAddressTest, TheHostIsWhatComesBeforeTheLastColon) {
  const struct {
    const char* listen;
    const char* host;
    bool wildcard;
  } cases[] = {
      {"10.0.0.5:7000", "10.0.0.5", false},   {"127.0.0.1:0", "127.0.0.1", false},
      {"node-3:7001", "node-3", false},       {"[::1]:7000", "[::1]", false},
      {"0.0.0.0:7000", "0.0.0.0", true},      {"[::]:7000", "[::]", true},
      {":7000", "", true},                    {"node-3", "node-3", false},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(ListenHost(c.listen), c.host) << c.listen;
    EXPECT_EQ(IsWildcardHost(ListenHost(c.listen)), c.wildcard) << c.listen;
  }
  EXPECT_TRUE(IsWildcardHost("::"));
}

}  // namespace
}  // namespace shardline
