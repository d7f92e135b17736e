#include "common/net/rpc_auth.h"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/net/rpc_auth_metrics.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"
#include "gtest/gtest.h"

namespace shardline {
namespace {

class RpcAuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/rpc_auth_" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::system(("rm -rf '" + dir_ + "' && mkdir -p '" + dir_ + "'").c_str());
    unsetenv(kTokenEnvVar);
  }
  void TearDown() override { unsetenv(kTokenEnvVar); }

  std::string File(const std::string& name, const std::string& contents, mode_t mode) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << contents;
    chmod(path.c_str(), mode);
    return path;
  }

  std::string dir_;
};

TEST_F(RpcAuthTest, TheTokenComesFromAPrivateFileOrTheEnvironment) {
  EXPECT_EQ(*LoadToken(Env::Default(), ""), "");  // neither: no token
  EXPECT_EQ(*LoadToken(Env::Default(), File("t", "  abc123\n", 0600)), "abc123");
  setenv(kTokenEnvVar, "from-env\n", 1);
  EXPECT_EQ(*LoadToken(Env::Default(), ""), "from-env");
  EXPECT_EQ(*LoadToken(Env::Default(), File("t2", "from-file", 0400)), "from-file");  // the file wins
}

TEST_F(RpcAuthTest, BadTokenSourcesAreRefusedNamingTheFile) {
  const std::string shared = File("shared", "abc", 0644);
  absl::StatusOr<std::string> t = LoadToken(Env::Default(), shared);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find(shared), std::string::npos) << t.status();

  const std::string empty = File("empty", " \n", 0600);
  t = LoadToken(Env::Default(), empty);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find(empty), std::string::npos) << t.status();

  t = LoadToken(Env::Default(), dir_ + "/missing");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound);

  setenv(kTokenEnvVar, "", 1);
  EXPECT_FALSE(LoadToken(Env::Default(), "").ok());
}

TEST_F(RpcAuthTest, SecretsAreWrittenPrivatelyAndReplacedWhole) {
  const std::string path = dir_ + "/token";
  ASSERT_TRUE(WritePrivateFile(path, "first").ok());
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(*LoadToken(Env::Default(), path), "first");
  chmod(path.c_str(), 0644);  // a file someone loosened is replaced by a private one
  ASSERT_TRUE(WritePrivateFile(path, "second").ok());
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(*LoadToken(Env::Default(), path), "second");
  EXPECT_FALSE(Env::Default()->FileExists(path + ".tmp"));
  EXPECT_FALSE(WritePrivateFile(dir_ + "/missing/dir/token", "x").ok());
}

TEST_F(RpcAuthTest, ARankCredentialIsItsOwnKindOfSecret) {
  RpcAuth worker(Env::Default(), RankCredentialText("job-token", 3));
  EXPECT_TRUE(worker.enabled());
  EXPECT_EQ(worker.credential().rank, 3);
  EXPECT_EQ(worker.token(), "") << "a worker with a rank credential does not hold the token";
  RpcAuth coordinator(Env::Default(), "job-token");
  EXPECT_EQ(coordinator.credential().rank, -1);
  EXPECT_EQ(coordinator.token(), "job-token");
  // The coordinator answers a Hello for rank 3 with what only rank 3's
  // credential (or the token) can check.
  absl::StatusOr<HelloAnswer> a = coordinator.AnswerHello(3, "0123456789abcdef");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->server_proof, ServerProof(worker.credential().key, "0123456789abcdef", a->server_nonce));
  EXPECT_FALSE(coordinator.AnswerHello(3, "not hex!").ok());
  EXPECT_TRUE(coordinator.AnswerHello(kReaderRank, "0123456789abcdef").ok());  // a reader
  EXPECT_FALSE(coordinator.AnswerHello(-3, "0123456789abcdef").ok());
  EXPECT_EQ(worker.AnswerHello(3, "0123456789abcdef").status().code(), absl::StatusCode::kFailedPrecondition);
  // A token file that looks like a credential but is not one is refused,
  // naming the file.
  Args args;
  args.flags["token_file"] = {File("bad", "shardline-rank/3/zz", 0600)};
  absl::StatusOr<std::unique_ptr<RpcAuth>> loaded = LoadRpcAuth(Env::Default(), args, "127.0.0.1:0");
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.status().message().find("bad"), std::string::npos) << loaded.status();
}

// Issue 62: a reason added to RejectReason but not to the counter's list
// aborted the coordinator on its first refusal of that kind.
TEST(RejectedRpcCounterTest, EveryReasonHasItsLabelAndItsSeries) {
  prometheus::Registry registry;
  const std::function<void(RejectReason)> count = RejectedRpcCounter(registry);
  for (RejectReason r : kRejectReasons) {
    EXPECT_STRNE(RejectReasonLabel(r), "unknown");
    count(r);
  }
  const std::string page = prometheus::TextSerializer().Serialize(registry.Collect());
  for (const char* label : {"missing_token", "wrong_token", "not_a_member", "stale_session", "wrong_rank",
                            "replayed_proof", "read_only", "rate_limited"}) {
    EXPECT_TRUE(absl::StrContains(page, absl::StrCat("shardline_rpc_rejected_total{reason=\"", label, "\"} 1")))
        << label << "\n" << page;
  }
}

TEST_F(RpcAuthTest, TlsFilesGoTogetherAndErrorsNameTheFlag) {
  EXPECT_FALSE(LoadTls(Env::Default(), "", "", "")->has_value());  // none: plain TCP
  const std::string pem = File("c.pem", "-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n", 0644);
  absl::StatusOr<std::optional<TlsPem>> t = LoadTls(Env::Default(), pem, "", "");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << "only one of three";
  t = LoadTls(Env::Default(), pem, dir_ + "/missing.key", pem);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(t.status().message().find("--tls_key"), std::string::npos) << t.status();
  t = LoadTls(Env::Default(), pem, File("k.key", "not pem", 0600), pem);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("--tls_key"), std::string::npos) << t.status();
  t = LoadTls(Env::Default(), pem, File("k2.key", "-----BEGIN PRIVATE KEY-----\n", 0600), pem);
  ASSERT_TRUE(t.ok() && t->has_value()) << t.status();
  EXPECT_TRUE(absl::StrContains((*t)->private_key, "PRIVATE KEY"));
}

TEST(ListenSecurityTest, MetricsBeyondLoopbackGetAWarning) {
  EXPECT_EQ(MetricsListenWarning("127.0.0.1:9100"), "");
  EXPECT_EQ(MetricsListenWarning("localhost:0"), "");
  for (const char* l : {"0.0.0.0:9100", "[::]:9100", "10.0.0.2:9100"}) {
    EXPECT_NE(MetricsListenWarning(l).find(l), std::string::npos) << l;
  }
}

TEST(ListenSecurityTest, OnlyLoopbackMayGoWithoutAToken) {
  for (const char* l : {"127.0.0.1:0", "127.1.2.3:7000", "localhost:80", "[::1]:5", "LOCALHOST:1"}) {
    EXPECT_TRUE(IsLoopbackListen(l)) << l;
    EXPECT_TRUE(CheckListenSecurity("--listen", l, /*has_credentials=*/false, /*insecure=*/false).ok()) << l;
  }
  for (const char* l : {"0.0.0.0:7000", "[::]:7000", ":7000", "10.0.0.2:7000", "127.example.com:1", "host:1"}) {
    EXPECT_FALSE(IsLoopbackListen(l)) << l;
    const absl::Status s = CheckListenSecurity("--listen", l, false, false);
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << l;
    EXPECT_NE(s.message().find(l), std::string::npos) << s;
    EXPECT_TRUE(CheckListenSecurity("--listen", l, /*has_credentials=*/true, false).ok()) << l;
    EXPECT_TRUE(CheckListenSecurity("--listen", l, false, /*insecure=*/true).ok()) << l;
  }
}

}  // namespace
}  // namespace shardline
