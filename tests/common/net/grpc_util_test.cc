#include "common/net/grpc_util.h"

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "proto/transport.grpc.pb.h"

namespace shardline {
namespace {

GrpcServerOptions ServerOptions() {
  GrpcServerOptions o;
  o.env = Env::Default();
  return o;
}

TEST(GrpcUtilTest, StatusConversionKeepsCodeAndMessage) {
  const absl::Status a = absl::UnavailableError("peer rank 3 is gone");
  const grpc::Status g = ToGrpcStatus(a);
  EXPECT_EQ(g.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(g.error_message(), "peer rank 3 is gone");
  EXPECT_EQ(FromGrpcStatus(g), a);
  EXPECT_TRUE(FromGrpcStatus(ToGrpcStatus(absl::OkStatus())).ok());
  EXPECT_EQ(FromGrpcStatus(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "late")).code(),
            absl::StatusCode::kDeadlineExceeded);
}

TEST(GrpcUtilTest, SecondServerOnAPortInUseFailsInsteadOfSharingIt) {
  transport::Transport::Service service;  // any synchronous service will do
  absl::StatusOr<GrpcServer> first = StartGrpcServer("127.0.0.1:0", {&service}, ServerOptions());
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_GT(first->port, 0);
  const std::string taken = "127.0.0.1:" + std::to_string(first->port);
  transport::Transport::Service other;
  absl::StatusOr<GrpcServer> second = StartGrpcServer(taken, {&other}, ServerOptions());
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(second.status().message(), taken)) << second.status();
  first->server->Shutdown();
}

}  // namespace
}  // namespace shardline
