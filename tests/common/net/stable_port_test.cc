#include "common/net/stable_port.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace shardline {
namespace {

std::string RangeFile(const std::string& name, const std::string& text) {
  const std::string path = std::string(::testing::TempDir()) + "/" + name;
  std::ofstream(path) << text;
  return path;
}

// Listens on 127.0.0.1:port; returns the socket or -1.
int Listen(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa = {};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  sa.sin_port = htons(static_cast<uint16_t>(port));
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 || listen(fd, 1) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

TEST(StablePortTest, ThePortIsBelowTheEphemeralRangeAndCanBeListenedOn) {
  StablePortOptions o;
  o.port_range_file = RangeFile("range_a", "32768\t60999\n");
  std::set<int> seen;
  for (int i = 0; i < 20; ++i) {
    absl::StatusOr<int> port = PickStablePort(Env::Default(), "127.0.0.1", o);
    ASSERT_TRUE(port.ok()) << port.status();
    EXPECT_GE(*port, 10000);
    EXPECT_LT(*port, 32768);
    seen.insert(*port);
  }
  EXPECT_GT(seen.size(), 10u) << "candidates are drawn at random, not one fixed port";
  absl::StatusOr<int> port = PickStablePort(Env::Default(), "127.0.0.1", o);
  ASSERT_TRUE(port.ok());
  const int fd = Listen(*port);
  EXPECT_GE(fd, 0);
  close(fd);
}

TEST(StablePortTest, ARangeThatStartsLowLeavesThePortsAboveIt) {
  StablePortOptions o;
  o.port_range_file = RangeFile("range_b", "1024 40000\n");
  for (int i = 0; i < 20; ++i) {
    absl::StatusOr<int> port = PickStablePort(Env::Default(), "127.0.0.1", o);
    ASSERT_TRUE(port.ok()) << port.status();
    EXPECT_GT(*port, 40000);
  }
}

TEST(StablePortTest, APortInUseIsNeverReturned) {
  const int held = Listen(0);
  ASSERT_GE(held, 0);
  sockaddr_in sa = {};
  socklen_t len = sizeof(sa);
  getsockname(held, reinterpret_cast<sockaddr*>(&sa), &len);
  const int port = ntohs(sa.sin_port);
  // The only candidate is the held port.
  StablePortOptions o;
  o.floor = port;
  o.attempts = 8;
  o.port_range_file = RangeFile("range_c", std::to_string(port + 1) + " 65535\n");
  absl::StatusOr<int> got = PickStablePort(Env::Default(), "127.0.0.1", o);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kNotFound) << (got.ok() ? std::to_string(*got) : "");
  EXPECT_NE(got.status().message().find(std::to_string(port)), std::string::npos) << got.status();
  close(held);
  // Freed, it is the one returned.
  got = PickStablePort(Env::Default(), "127.0.0.1", o);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, port);
}

TEST(StablePortTest, ARangeThatLeavesNoRoomIsNamed) {
  StablePortOptions o;
  o.port_range_file = RangeFile("range_d", "1024 65535\n");
  absl::StatusOr<int> got = PickStablePort(Env::Default(), "127.0.0.1", o);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(got.status().message().find("range_d"), std::string::npos) << got.status();
}

TEST(StablePortTest, AHostThatIsNotIPv4IsRefused) {
  EXPECT_EQ(PickStablePort(Env::Default(), "localhost").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace shardline
