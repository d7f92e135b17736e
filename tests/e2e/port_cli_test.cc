// `shardline port`: the ports scripts give servers that must restart on them.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "tests/e2e/subprocess.h"

namespace shardline {
namespace {

bool BindsOnLoopback(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  close(fd);
  return ok;
}

TEST(PortCliTest, PrintsDistinctFreePortsOutsideTheEphemeralRange) {
  int low = 0, high = 0;
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> low >> high;
  ASSERT_GT(high, low);
  Subprocess p({BinPath("shardline"), "port", "--count", "8"});
  ASSERT_EQ(p.Wait(absl::Seconds(30)), 0) << p.Output();
  std::set<int> ports;
  for (absl::string_view line : absl::StrSplit(p.Output(), '\n', absl::SkipEmpty())) {
    int port = 0;
    ASSERT_TRUE(absl::SimpleAtoi(line, &port)) << "not a port: '" << line << "' in\n" << p.Output();
    EXPECT_TRUE(port < low || port > high) << port << " is in the ephemeral range " << low << "-" << high;
    EXPECT_TRUE(BindsOnLoopback(port)) << port << " is taken";
    ports.insert(port);
  }
  EXPECT_EQ(ports.size(), 8u) << p.Output();
}

// In a network namespace of the test's own whose ephemeral range starts at
// 10006, only 10000-10005 lie between shardline's floor (10000) and it.
Subprocess PortInSmallRange(const std::string& count) {
  return Subprocess({"/usr/bin/unshare", "-n", "/bin/sh", "-c",
                     "ip link set lo up && echo '10006 60999' > /proc/sys/net/ipv4/ip_local_port_range && "
                     "exec \"$0\" port --count \"$1\"",
                     BinPath("shardline"), count});
}

// The redraw bound: six candidates give six ports, and asking for ten ends
// after a bounded number of draws, exit 1 naming what was found, instead
// of drawing forever.
TEST(PortCliTest, TooFewCandidatesEndAfterBoundedRedrawsExitOne) {
  Subprocess six = PortInSmallRange("6");
  ASSERT_EQ(six.Wait(absl::Seconds(30)), 0) << six.Output();
  EXPECT_EQ(six.Output(), "10000\n10001\n10002\n10003\n10004\n10005\n");
  Subprocess ten = PortInSmallRange("10");
  EXPECT_EQ(ten.Wait(absl::Seconds(30)), 1) << ten.Output();
  EXPECT_TRUE(absl::StrContains(ten.Output(), "found only 6 distinct free ports on 127.0.0.1 of 10 asked for"))
      << ten.Output();
  EXPECT_FALSE(absl::StrContains(ten.Output(), "10000\n")) << ten.Output();
}

TEST(PortCliTest, BadInputExitsOneNamingTheProblem) {
  struct Case {
    std::vector<std::string> args;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {{"--count", "0"}, "--count: 0 is not between 1 and 1000"},
      {{"--count", "many"}, "--count: 'many' is not an integer"},
      {{"--host", "not-an-address"}, "not-an-address"},
      {{"--port", "1"}, "unknown flag --port"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> argv = {BinPath("shardline"), "port"};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    Subprocess p(argv);
    EXPECT_EQ(p.Wait(absl::Seconds(30)), 1) << c.expect;
    EXPECT_TRUE(absl::StrContains(p.Output(), c.expect)) << "want '" << c.expect << "' in:\n" << p.Output();
  }
}

}  // namespace
}  // namespace shardline
