// The SentencePiece helper's client when the helper misbehaves: one that
// hangs is DeadlineExceeded by the request's deadline, one that dies is
// Unavailable naming it, and neither leaves the caller waiting.
#include "worker/data/spm_client.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/worker/data/token_test_util.h"

namespace shardline {
namespace {

// Points $SHARDLINE_SPM_HELPER at a shell script with `body` for the test's life.
class FakeHelper {
 public:
  FakeHelper(const std::string& name, const std::string& body) {
    path_ = TokenTestDir(name) + "/helper.sh";
    std::ofstream(path_) << "#!/bin/sh\n" << body << "\n";
    chmod(path_.c_str(), 0755);
    setenv("SHARDLINE_SPM_HELPER", path_.c_str(), 1);
  }
  ~FakeHelper() { unsetenv("SHARDLINE_SPM_HELPER"); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(SpmClientTest, AHelperThatHangsMissesTheDeadline) {
  FakeHelper helper("hangs", "exec sleep 30");
  SpmClientOptions options;
  options.request_millis = 300;
  auto client = SpmClient::Start(Env::Default(), options);
  ASSERT_TRUE(client.ok()) << client.status();
  const auto start = std::chrono::steady_clock::now();
  auto pieces = (*client)->Load("not a model");
  ASSERT_FALSE(pieces.ok());
  EXPECT_EQ(pieces.status().code(), absl::StatusCode::kDeadlineExceeded) << pieces.status();
  EXPECT_TRUE(absl::StrContains(pieces.status().message(), helper.path())) << pieces.status();
  // Broken once, broken after: no second wait.
  std::vector<int32_t> ids;
  EXPECT_EQ((*client)->Encode("x", &ids).code(), absl::StatusCode::kFailedPrecondition);
  client->reset();  // kills the sleeping helper rather than waiting 30 s for it
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(25));
}

TEST(SpmClientTest, AHelperThatDiesIsNamed) {
  FakeHelper helper("dies", "exit 3");
  auto client = SpmClient::Start(Env::Default());
  ASSERT_TRUE(client.ok()) << client.status();
  std::vector<int32_t> ids;
  const absl::Status s = (*client)->Encode("some text\n", &ids);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), helper.path())) << s;
}

// Issue 62: a helper claiming 2^28 pieces made the client allocate ~10 GiB
// before reading one. A model of N bytes holds at most N / 4 pieces and N
// bytes of their text; past that the helper is broken, named, at once.
TEST(SpmClientTest, AHelperClaimingMorePiecesThanTheModelHoldsIsRefusedBeforeAnyAllocation) {
  // Reads the 20-byte load request, answers OK and a vocabulary of 2^28.
  FakeHelper helper("claims", "head -c 20 >/dev/null; printf '\\000\\000\\000\\000\\000\\000\\000\\020'; sleep 5");
  auto client = SpmClient::Start(Env::Default());
  ASSERT_TRUE(client.ok()) << client.status();
  auto pieces = (*client)->Load("not a model");
  ASSERT_FALSE(pieces.ok());
  EXPECT_EQ(pieces.status().code(), absl::StatusCode::kDataLoss) << pieces.status();
  EXPECT_TRUE(absl::StrContains(pieces.status().message(), "a vocabulary of 268435456 for a model of 11 bytes"))
      << pieces.status();
  EXPECT_TRUE(absl::StrContains(pieces.status().message(), helper.path())) << pieces.status();
  client->reset();
}

// Issue 62: a SIGSTOPped helper stalled `shardline data tokenize` silently
// for up to its 10-minute reply deadline. A helper that makes no progress
// (its CPU time stands still, or it is stopped) is broken within
// liveness_millis, named, and killed with the client.
TEST(SpmClientTest, AStoppedHelperIsNamedWithinTheLivenessBoundNotTheReplyDeadline) {
  FakeHelper helper("stopped", "head -c 20 >/dev/null; kill -STOP $$");
  SpmClientOptions options;
  options.liveness_millis = 1500;  // the reply deadline stays 10 minutes
  auto client = SpmClient::Start(Env::Default(), options);
  ASSERT_TRUE(client.ok()) << client.status();
  const auto start = std::chrono::steady_clock::now();
  auto pieces = (*client)->Load("not a model");
  ASSERT_FALSE(pieces.ok());
  EXPECT_EQ(pieces.status().code(), absl::StatusCode::kDeadlineExceeded) << pieces.status();
  EXPECT_TRUE(absl::StrContains(pieces.status().message(), "made no progress")) << pieces.status();
  EXPECT_TRUE(absl::StrContains(pieces.status().message(), "stopped")) << pieces.status();
  EXPECT_TRUE(absl::StrContains(pieces.status().message(), helper.path())) << pieces.status();
  client->reset();  // SIGKILL ends a stopped process too
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::minutes(5)) << "waited for the reply deadline";
}

}  // namespace
}  // namespace shardline
