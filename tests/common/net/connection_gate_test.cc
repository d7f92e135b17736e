// The connection gate (common/net/connection_gate.h): its admission rule as
// a table, and the gate itself in front of a real gRPC server on loopback,
// with floods from another loopback address (127.0.0.2).
#include "common/net/connection_gate.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "common/net/grpc_util.h"
#include "common/platform/descriptors.h"
#include "grpcpp/health_check_service_interface.h"
#include "proto/transport.grpc.pb.h"

namespace shardline {
namespace {

TEST(ConnectionGateTest, AdmissionIsBoundedPerAddressAndInAllWithAShareForSmallHolders) {
  ConnectionGateOptions o;
  o.max_per_address = 100;
  o.max_total = 200;
  o.guaranteed_per_address = 8;
  struct Case {
    int from, total;
    GateVerdict want;
  };
  for (const Case& c : std::vector<Case>{
           {0, 0, GateVerdict::kAdmit},
           {99, 150, GateVerdict::kAdmit},
           {100, 150, GateVerdict::kPerAddress},  // one address, however empty the rest
           {50, 199, GateVerdict::kAdmit},
           {50, 200, GateVerdict::kTotal},   // a large holder waits once the server is full
           {7, 200, GateVerdict::kAdmit},    // a small holder still gets in ...
           {7, 299, GateVerdict::kAdmit},
           {7, 300, GateVerdict::kTotal},    // ... up to 1.5 x max_total, never further
           {0, 300, GateVerdict::kTotal},
       }) {
    EXPECT_EQ(AdmitConnection(c.from, c.total, o), c.want) << c.from << " of " << c.total;
  }
  o.max_total = 0;  // unbounded in all
  EXPECT_EQ(AdmitConnection(50, 1 << 20, o), GateVerdict::kAdmit);
  EXPECT_EQ(ConnectionBudget(20000), (20000 - kDescriptorReserve) / 2);
  EXPECT_EQ(ConnectionBudget(100), 64);
}

// A TCP connection from `source` to 127.0.0.1:`port`; -1 if it fails.
int Connect(const char* source, int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in from{};
  from.sin_family = AF_INET;
  inet_pton(AF_INET, source, &from.sin_addr);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof(from)) != 0 ||
      connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// True if the server closed `fd` (a read sees the end) within `within`.
bool ClosedBy(int fd, absl::Duration within) {
  const absl::Time until = absl::Now() + within;
  timeval tv{0, 100'000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  char buf[4096];
  while (absl::Now() < until) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n == 0) return true;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return true;  // reset
  }
  return false;
}

// A health check over a fresh channel: does the server answer a new client?
bool Answers(int port) {
  grpc::ChannelArguments args = DefaultChannelArguments();
  args.SetInt("shardline.test_fresh_channel", static_cast<int>(absl::ToUnixMicros(absl::Now()) & 0x7fffffff));
  auto channel = grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials(), args);
  return channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10));
}

const char kPreface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00";

TEST(ConnectionGateTest, InFrontOfAGrpcServerAFloodIsBoundedSilentAndIdleConnectionsCloseAndItKeepsAccepting) {
  RaiseDescriptorLimit();
  std::atomic<int> refused_per_address{0}, silent{0};
  transport::Transport::Service service;
  GrpcServerOptions options;
  options.env = Env::Default();
  options.gate.max_per_address = 50;
  options.gate.first_bytes_timeout = absl::Seconds(1);
  options.gate.on_refused = [&](const char* reason) {
    if (std::string(reason) == "per_address") ++refused_per_address;
    if (std::string(reason) == "silent") ++silent;
  };
  options.max_connection_idle = absl::Seconds(5);
  absl::StatusOr<GrpcServer> server = StartGrpcServer("127.0.0.1:0", {&service}, options);
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_NE(server->gate, nullptr);

  // 80 connections from 127.0.0.2 that send the HTTP/2 preface and stay.
  std::vector<int> flood;
  for (int i = 0; i < 80; ++i) {
    const int fd = Connect("127.0.0.2", server->port);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(write(fd, kPreface, sizeof(kPreface) - 1), static_cast<ssize_t>(sizeof(kPreface) - 1));
    flood.push_back(fd);
  }
  // 30 of them are refused at once (the address holds its 50), and a
  // client from another address is served meanwhile.
  EXPECT_TRUE(Answers(server->port));
  int closed_at_once = 0;
  for (int fd : flood) closed_at_once += ClosedBy(fd, absl::Milliseconds(20));
  EXPECT_GE(closed_at_once, 30);
  EXPECT_EQ(refused_per_address.load(), 30);
  // The rest are idle: gRPC closes them after max_connection_idle.
  int closed_idle = 0;
  for (int fd : flood) closed_idle += ClosedBy(fd, absl::Seconds(15));
  EXPECT_EQ(closed_idle, 80);
  for (int fd : flood) close(fd);
  // The gate counts a connection until it sees gRPC closed it (within a
  // reap, 0.5 s): then the address may connect again.
  const absl::Time until = absl::Now() + absl::Seconds(10);
  while (server->gate->open() > 0 && absl::Now() < until) absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(server->gate->open(), 0) << "closed connections still counted";

  // Silent connections (nothing sent) are closed by the gate.
  std::vector<int> silent_fds;
  for (int i = 0; i < 10; ++i) silent_fds.push_back(Connect("127.0.0.2", server->port));
  int closed_silent = 0;
  for (int fd : silent_fds) {
    closed_silent += ClosedBy(fd, absl::Seconds(10));
    close(fd);
  }
  EXPECT_EQ(closed_silent, 10);
  EXPECT_EQ(silent.load(), 10);
  EXPECT_TRUE(Answers(server->port));
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
}

}  // namespace
}  // namespace shardline
