// Attacks from outside the job, with real gRPC clients against a real job:
// without the job token nobody can join, steer, read or feed it, and the job
// finishes as if nothing happened (docs/security.md).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/platform/descriptors.h"
#include "common/platform/env.h"
#include "common/net/grpc_util.h"
#include "common/platform/mutex.h"
#include "common/net/auth_proof.h"
#include "common/net/rpc_auth.h"
#include "proto/coordinator.grpc.pb.h"
#include "tests/e2e/e2e_util.h"
#include "tests/e2e/final_state.h"
#include "tests/e2e/subprocess.h"
#include "tests/util/http.h"
#include "tests/util/pki.h"
#include "tests/util/proof.h"
#include "worker/collective/grpc_transport.h"

namespace shardline {
namespace {

// The number after `needle` in `text` (the first occurrence); -1 if absent.
double NumberAfter(const std::string& text, const std::string& needle) {
  const size_t at = text.find(needle);
  if (at == std::string::npos) return -1;
  return std::atof(text.c_str() + at + needle.size());
}

int PortAfter(const std::string& text, const std::string& needle) {
  return static_cast<int>(NumberAfter(text, needle));
}

// Twenty well-formed data-plane frames of huge values, naming rank 1 of
// generation 1, sent to worker 0 of the job in `dir` by a transport with
// `auth` (null: none) and `keys`.
void FeedWorker0(const std::string& dir, RpcAuth* auth, MemberKeys keys) {
  const int w0_transport = PortAfter(ReadAll(dir + "/logs/worker-0.log"), "worker transport on 127.0.0.1:");
  ASSERT_GT(w0_transport, 0);
  TransportServerOptions options;
  options.auth = auth;
  std::unique_ptr<TransportServer> rogue = *TransportServer::Start(Env::Default(), "127.0.0.1:0", options);
  absl::StatusOr<std::unique_ptr<Transport>> feed =
      rogue->Connect(1, 1, {absl::StrCat("127.0.0.1:", w0_transport), absl::StrCat("127.0.0.1:", rogue->port())},
                     ConnectOptions{std::move(keys)});
  ASSERT_TRUE(feed.ok()) << feed.status();
  std::vector<float> poison(4096, 1e30f);
  const auto bytes = absl::MakeConstSpan(reinterpret_cast<const char*>(poison.data()), poison.size() * 4);
  for (uint64_t tag = 0; tag < 20; ++tag) (*feed)->Send(0, tag, bytes, absl::Now() + absl::Seconds(5)).IgnoreError();
  (*feed)->Flush(absl::Now() + absl::Seconds(5)).IgnoreError();
}

// shardline_rpc_rejected_total{reason} on the /metrics page at `port`,
// polled until it reaches `at_least` (a refusal may trail the rogue's
// flush) or 20 s pass.
double Rejected(int port, const std::string& reason, double at_least = 0) {
  const std::string series = "shardline_rpc_rejected_total{reason=\"" + reason + "\"} ";
  const absl::Time until = absl::Now() + absl::Seconds(20);
  for (;;) {
    absl::StatusOr<std::string> page = HttpGet(port, "/metrics");
    const double v = page.ok() ? NumberAfter(*page, series) : -1;
    if (v >= at_least || absl::Now() > until) return v;
    absl::SleepFor(absl::Milliseconds(100));
  }
}

int CoordinatorMetricsPort(const std::string& dir) {
  return PortAfter(ReadAll(dir + "/coordinator.metrics_address"), "127.0.0.1:");
}
int Worker0MetricsPort(const std::string& dir) {
  return PortAfter(ReadAll(dir + "/logs/worker-0.log"), "metrics on port ");
}

// The job in `dir` ran to `steps` in one generation with its usual accuracy.
void ExpectUndisturbed(const std::string& dir, int steps) {
  const std::vector<std::string> evals = SplitLines(dir + "/metrics.jsonl", "eval");
  ASSERT_FALSE(evals.empty());
  EXPECT_EQ(JsonField(evals.back(), "step"), steps);
  EXPECT_GT(JsonField(evals.back(), "accuracy"), 0.75);
  const std::string coord_log = ReadAll(dir + "/logs/coordinator.log");
  EXPECT_EQ(coord_log.find("generation 2"), std::string::npos) << coord_log;
}

// Entries under `dir` (not `dir` itself) with any group or other bit.
std::vector<std::string> PublicEntries(const std::string& dir) {
  std::vector<std::string> out;
  std::vector<std::string> todo = {dir};
  while (!todo.empty()) {
    const std::string d = todo.back();
    todo.pop_back();
    absl::StatusOr<std::vector<std::string>> children = Env::Default()->GetChildren(d);
    if (!children.ok()) continue;
    for (const std::string& c : *children) {
      const std::string path = d + "/" + c;
      struct stat st;
      if (lstat(path.c_str(), &st) != 0 || S_ISLNK(st.st_mode)) continue;
      if ((st.st_mode & 077) != 0) out.push_back(absl::StrCat(path, " ", st.st_mode & 0777));
      if (S_ISDIR(st.st_mode)) todo.push_back(path);
    }
  }
  return out;
}

// Issue 33, finding 1: one request for /favicon.ico (what a browser asks by
// itself) or a POST to /metrics ended a worker with SIGSEGV: civetweb's error
// reply overflowed a thread stack that OpenBLAS's static TLS had shrunk.
// Every process kind gets a browser's, a scanner's and Prometheus's
// requests while 300 clients hang on its port; each is answered, scrapes go
// on, and the job finishes in one generation.
TEST(SecurityTest, HostileHttpRequestsToEveryProcessLeaveTheJobUndisturbed) {
  unsetenv(kTokenEnvVar);
  const std::string dir = FreshDir("security_http");
  // Long enough (several seconds) that every probe reaches a running job.
  Subprocess launch(LaunchArgv(dir, 2, {"train.total_steps=4000", "train.eval_every=0"}));
  ASSERT_TRUE(WaitForText(dir + "/logs/worker-1.log", "first step of this generation", absl::Seconds(60)))
      << launch.Output();
  const std::vector<std::pair<std::string, int>> ports = {
      {"coordinator", CoordinatorMetricsPort(dir)},
      {"worker 0", Worker0MetricsPort(dir)},
      {"worker 1", PortAfter(ReadAll(dir + "/logs/worker-1.log"), "metrics on port ")}};
  for (const auto& [process, port] : ports) {
    ASSERT_GT(port, 0) << process;
    std::vector<int> held;
    for (int i = 0; i < 300; ++i) held.push_back(HoldUnfinishedHttpRequest(port));
    for (const auto& [name, request] : HostileHttpRequests()) {
      absl::StatusOr<HttpResponse> r = HttpExchange(port, request);
      ASSERT_TRUE(r.ok()) << process << ", " << name << ": " << r.status() << "\n" << launch.Output();
      const bool served = name == "Prometheus scrape" || name == "absolute form";  // both ask for /metrics
      EXPECT_EQ(r->code >= 400, !served) << process << ", " << name << ": " << r->code;
    }
    absl::StatusOr<std::string> page = HttpGet(port, "/metrics");
    EXPECT_TRUE(page.ok()) << process << ": " << page.status();
    for (int fd : held) close(fd);
  }
  ASSERT_EQ(launch.Wait(absl::Seconds(240)), 0) << launch.Output();
  ExpectUndisturbed(dir, 4000);
  // Finding 7: what the job wrote is private to its user (umask 077), the
  // workdir's contents included (the test made the workdir itself).
  EXPECT_EQ(PublicEntries(dir), std::vector<std::string>{}) << "readable by group or others";
}

TEST(SecurityTest, WithoutTheTokenNobodyCanJoinSteerReadOrFeedTheJob) {
  unsetenv(kTokenEnvVar);
  const std::string dir = FreshDir("security_token");
  Subprocess launch(LaunchArgv(dir, 2, {"train.total_steps=600", "train.eval_every=0"}));
  ASSERT_TRUE(WaitForText(dir + "/logs/worker-0.log", "first step of this generation", absl::Seconds(60)))
      << launch.Output();

  // launch made a private token for the job, and gave each worker only its
  // rank's credential.
  struct stat st;
  ASSERT_EQ(stat((dir + "/token").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  const std::string first_token = ReadAll(dir + "/token");
  for (int rank : {0, 1}) {
    const std::string credential = absl::StrCat(dir, "/credentials/rank-", rank);
    EXPECT_EQ(ReadAll(credential).rfind(absl::StrCat("shardline-rank/", rank, "/"), 0), 0u) << credential;
    const std::vector<pid_t> pid = LaunchedWorker(dir, rank);
    ASSERT_EQ(pid.size(), 1u);
    std::string cmdline = ReadAll(absl::StrCat("/proc/", pid[0], "/cmdline"));
    for (char& c : cmdline) c = c == '\0' ? ' ' : c;
    EXPECT_NE(cmdline.find(credential + " "), std::string::npos) << cmdline;
    EXPECT_EQ(cmdline.find(dir + "/token"), std::string::npos) << cmdline;
  }

  const std::string coordinator = ReadAll(dir + "/coordinator.address");
  auto stub = coordinator::Coordinator::NewStub(
      grpc::CreateCustomChannel(coordinator, grpc::InsecureChannelCredentials(), DefaultChannelArguments()));
  for (const char* attacker : {"", "0123456789abcdef"}) {
    {  // read the job
      grpc::ClientContext ctx;
      AddProof(&ctx, coordinator, attacker, StatusMethod());
      coordinator::JobStatus status;
      EXPECT_EQ(stub->Status(&ctx, coordinator::StatusRequest(), &status).error_code(),
                grpc::StatusCode::UNAUTHENTICATED);
    }
    {  // take rank 0 (and with it the gradients, the config and the peers)
      grpc::ClientContext ctx;
      AddProof(&ctx, coordinator, attacker, RegisterMethod());
      coordinator::RegisterRequest req;
      req.set_transport_address("127.0.0.1:1");
      req.set_requested_rank(0);
      req.set_incarnation(99);
      coordinator::RegisterResponse world;
      EXPECT_EQ(stub->Register(&ctx, req, &world).error_code(), grpc::StatusCode::UNAUTHENTICATED);
      EXPECT_TRUE(world.config_text().empty());
      EXPECT_EQ(world.peers_size(), 0);
    }
    {  // steer it: fail the job, fake the end, mark checkpoints bad, plant a path
      grpc::ClientContext ctx;
      AddProof(&ctx, coordinator, attacker, HeartbeatMethod());
      auto stream = stub->Heartbeat(&ctx);
      coordinator::WorkerReport forged;
      forged.set_rank(0);
      forged.set_generation(1);
      forged.set_fatal_error("forged");
      forged.set_finished(true);
      forged.set_bad_checkpoint_step(500);
      coordinator::SavedShard* s = forged.add_saved();
      s->set_step(500);
      s->set_world_size(2);
      s->set_file("../../../../etc/passwd");
      stream->Write(forged);
      stream->WritesDone();
      EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
    }
  }

  // Feed it: well-formed data-plane frames naming rank 1 and the current
  // generation, from a transport that has no member tag.
  FeedWorker0(dir, nullptr, {});

  // Every refusal is counted where it happened.
  EXPECT_EQ(Rejected(CoordinatorMetricsPort(dir), "missing_token"), 3);
  EXPECT_EQ(Rejected(CoordinatorMetricsPort(dir), "wrong_token"), 3);
  EXPECT_GE(Rejected(Worker0MetricsPort(dir), "not_a_member", 1), 1);

  // The job never noticed: one generation, trained to the end, as accurate
  // as ever (poisoned frames took it to 0.10 before the token).
  ASSERT_EQ(launch.Wait(absl::Seconds(240)), 0) << launch.Output();
  ExpectUndisturbed(dir, 600);
  EXPECT_NE(ReadAll(dir + "/logs/coordinator.log").find("refused a call from"), std::string::npos);

  // Finding 2: the next run of the workdir (here, one that finds the job
  // done) has a fresh token: one that leaked before is worth nothing.
  Subprocess again(LaunchArgv(dir, 2, {"train.total_steps=600", "train.eval_every=0"}));
  ASSERT_EQ(again.Wait(absl::Seconds(120)), 0) << again.Output();
  EXPECT_NE(ReadAll(dir + "/token"), first_token);
  EXPECT_EQ(ReadAll(dir + "/credentials/rank-0").find(first_token), std::string::npos);
}

// What a flood of calls from one credential got, by status code.
struct FloodResult {
  int64_t ok = 0;
  int64_t rate_limited = 0;  // RESOURCE_EXHAUSTED
  int64_t unauthenticated = 0;
  int64_t other = 0;
};

// `threads` clients calling Status on the coordinator at `address` with
// `secret` for `seconds`: each starts a new session (a Hello) every
// `calls_per_session` calls. With `self_minted`, the clients skip Hello and
// make their own server nonces under their own key, as a credential could
// before issue 62.
FloodResult FloodStatus(const std::string& address, const std::string& secret, double seconds, int threads,
                        int calls_per_session, bool self_minted = false) {
  const Credential c = *ParseCredential(secret);
  Mutex mu;
  FloodResult total;
  std::vector<std::thread> clients;
  const absl::Time until = absl::Now() + absl::Seconds(seconds);
  for (int t = 0; t < threads; ++t) {
    clients.emplace_back([&, t] {
      grpc::ChannelArguments args = DefaultChannelArguments();
      args.SetInt("shardline.flood_client", t);  // a connection of its own
      auto stub = coordinator::Coordinator::NewStub(
          grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
      FloodResult mine;
      CallProof session;
      while (absl::Now() < until) {
        if (session.client_nonce.empty() || session.seq + 1 >= static_cast<uint64_t>(calls_per_session)) {
          session = CallProof{c.rank, *NewNonce(), "", 0, ""};
          if (self_minted) {
            session.server_nonce = ServerNonce(c.key, c.rank, session.client_nonce, absl::ToUnixMicros(absl::Now()));
          } else {
            grpc::ClientContext hello_ctx;
            hello_ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
            coordinator::HelloRequest hello;
            hello.set_rank(c.rank);
            hello.set_client_nonce(session.client_nonce);
            coordinator::HelloReply reply;
            if (!stub->Hello(&hello_ctx, hello, &reply).ok()) {
              ++mine.other;
              session = CallProof();
              continue;
            }
            session.server_nonce = reply.server_nonce();
          }
        } else {
          ++session.seq;
        }
        session.proof = ClientProof(c.key, session.client_nonce, session.server_nonce, StatusMethod(), session.seq);
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
        ctx.AddMetadata(kProofMetadataKey, FormatCallProof(session));
        coordinator::JobStatus status;
        switch (stub->Status(&ctx, coordinator::StatusRequest(), &status).error_code()) {
          case grpc::StatusCode::OK:
            ++mine.ok;
            break;
          case grpc::StatusCode::RESOURCE_EXHAUSTED:
            ++mine.rate_limited;
            break;
          case grpc::StatusCode::UNAUTHENTICATED:
            ++mine.unauthenticated;
            session = CallProof();  // as an honest client would: a new session
            break;
          default:
            ++mine.other;
        }
      }
      MutexLock lock(&mu);
      total.ok += mine.ok;
      total.rate_limited += mine.rate_limited;
      total.unauthenticated += mine.unauthenticated;
      total.other += mine.other;
    });
  }
  for (std::thread& t : clients) t.join();
  std::cerr << "flood of " << secret.substr(0, 18) << "...: " << total.ok << " ok, " << total.rate_limited
            << " rate limited, " << total.unauthenticated << " unauthenticated, " << total.other << " other\n";
  return total;
}

// Issue 62: a credential holder could lock every new session out. Server
// nonces were MACed under the client's own key, so any reader or rank
// credential minted sessions without a Hello, and 65,536 accepted proofs
// (any credential's) filled the one table: `shardline status` failed and
// workers (re)started during the flood exited 1. Now only the server makes
// sessions, each credential's calls live in its own share, and a credential
// that starts sessions (or a reader that calls) too fast is refused as
// `rate_limited`.
TEST(SecurityTest, ACredentialsFloodOfSessionsLocksOutNobodyElse) {
  unsetenv(kTokenEnvVar);
  const std::string dir = FreshDir("security_session_flood");
  Subprocess launch(LaunchArgv(dir, 2, {"train.total_steps=1000000", "train.eval_every=0"}, /*max_restarts=*/2));
  ASSERT_TRUE(WaitForText(dir + "/logs/worker-0.log", "first step of this generation", absl::Seconds(60)))
      << launch.Output();
  const std::string token = ReadAll(dir + "/token");
  const std::string coordinator = ReadAll(dir + "/coordinator.address");
  const std::string rank7 = RankCredentialText(std::string(absl::StripAsciiWhitespace(token)), 7);
  const std::string reader = ReaderCredentialText(std::string(absl::StripAsciiWhitespace(token)));

  // Self-minted sessions are refused, and leave nothing behind.
  const FloodResult minted = FloodStatus(coordinator, reader, 2, 2, 1000, /*self_minted=*/true);
  EXPECT_EQ(minted.ok, 0);
  EXPECT_GT(minted.unauthenticated, 100);

  // Rank 7's credential (a rank outside this world: a leaked file) floods
  // with new sessions and with calls, while worker 1 is killed and
  // restarted and an operator asks for the status.
  std::thread flood([&] {
    const FloodResult sessions = FloodStatus(coordinator, rank7, 8, 2, /*calls_per_session=*/1);
    EXPECT_GT(sessions.rate_limited, 0) << "new sessions past 20 a second are refused";
    EXPECT_GT(sessions.ok, 100);
  });
  std::thread calls([&] {
    const FloodResult many = FloodStatus(coordinator, rank7, 8, 2, /*calls_per_session=*/1'000'000);
    EXPECT_GT(many.ok, 1000);
    EXPECT_GT(many.rate_limited, 0) << "reads past 200 a second are refused";
  });
  absl::SleepFor(absl::Seconds(2));
  ASSERT_TRUE(SignalLaunchedWorker(dir, 1, SIGKILL));
  for (int i = 0; i < 2; ++i) {
    Subprocess status({BinPath("shardline"), "status", "--workdir", dir});
    EXPECT_EQ(status.Wait(absl::Seconds(30)), 0) << status.Output();
    absl::SleepFor(absl::Seconds(2));
  }
  flood.join();
  calls.join();
  // The restarted worker rejoined during the flood: a second generation
  // formed and trains.
  ASSERT_TRUE(WaitForText(dir + "/logs/coordinator.log", "generation 2", absl::Seconds(60)));

  // The reader's calls are rate-limited too, with the label saying so.
  const FloodResult readers = FloodStatus(coordinator, reader, 4, 2, /*calls_per_session=*/1'000'000);
  EXPECT_GT(readers.rate_limited, 0);
  EXPECT_GT(Rejected(CoordinatorMetricsPort(dir), "rate_limited", 1), 0);
  EXPECT_GT(Rejected(CoordinatorMetricsPort(dir), "stale_session", 100), 100);

  // After the floods, the status command answers at once, and training
  // goes on.
  Subprocess status({BinPath("shardline"), "status", "--workdir", dir});
  EXPECT_EQ(status.Wait(absl::Seconds(30)), 0) << status.Output();
  const int64_t after = LoggedStep(dir);
  EXPECT_TRUE(WaitForStep(dir, after + 500, absl::Seconds(60)));
  EXPECT_EQ(ReadAll(dir + "/logs/coordinator.log").find("generation 3"), std::string::npos);
  launch.Signal(SIGTERM);
  EXPECT_EQ(launch.Wait(absl::Seconds(60)), 0) << launch.Output();
}

// `count` TCP connections from `source` to 127.0.0.1:`port`, each sending
// the HTTP/2 preface (and an empty SETTINGS frame) if `preface`, else
// nothing; their descriptors (failed connects are left out).
std::vector<int> IdleConnections(const char* source, int port, int count, bool preface) {
  static const char kPreface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00";
  std::vector<int> fds;
  for (int i = 0; i < count; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) break;
    timeval tv{2, 0};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    sockaddr_in from{}, to{};
    from.sin_family = to.sin_family = AF_INET;
    inet_pton(AF_INET, source, &from.sin_addr);
    inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    to.sin_port = htons(static_cast<uint16_t>(port));
    if (bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof(from)) != 0 ||
        connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0) {
      close(fd);
      continue;
    }
    if (preface) (void)!write(fd, kPreface, sizeof(kPreface) - 1);
    fds.push_back(fd);
  }
  return fds;
}

// Issue 62: two local processes holding 21,000 connections that sent only
// the HTTP/2 preface made the coordinator miss heartbeats, fail 7 commits
// ("Too many open files") and, once they closed, never accept again; the
// same against a worker's transport port broke the next generation. Here a
// job runs with 4,096 descriptors (so the flood is past what the old
// servers could take) while four other loopback addresses open 3,600 idle
// connections to the coordinator and 3,600 to worker 0's transport port:
// the job ends with the uninterrupted run's bits, and `shardline status`
// answers during the flood and after it.
TEST(SecurityTest, AnIdleConnectionFloodLeavesTheJobItsBitsAndStatusAnswers) {
  unsetenv(kTokenEnvVar);
  RaiseDescriptorLimit();  // this process holds the flood's 7,200 sockets
  // 8,000 steps (about 30 s alone here): the job must outlast the flood
  // and the status calls during it, so that `after` asks a coordinator
  // still serving. At 3,000 steps a quiet machine ended the job first, and
  // `after` waited for a coordinator that had exited (checked below).
  constexpr int kSteps = 8000;
  const std::vector<std::string> run = {absl::StrCat("train.total_steps=", kSteps), "checkpoint.every_steps=1000",
                                        "train.eval_every=0", "train.log_every=500"};
  auto launch_argv = [&](const std::string& dir) {
    std::vector<std::string> argv = {"/usr/bin/prlimit", "--nofile=4096:4096"};
    for (const std::string& a : LaunchArgv(dir, 2, run)) argv.push_back(a);
    return argv;
  };
  const std::string clean = FreshDir("security_conn_clean");
  Subprocess a(launch_argv(clean));
  ASSERT_EQ(a.Wait(absl::Seconds(240)), 0) << a.Output();
  const std::vector<float> want = FinalState(clean, kSteps, 2);
  ASSERT_FALSE(want.empty());

  const std::string dir = FreshDir("security_conn_flood");
  Subprocess launch(launch_argv(dir));
  ASSERT_TRUE(WaitForText(dir + "/logs/worker-0.log", "first step of this generation", absl::Seconds(60)))
      << launch.Output();
  const int coordinator = PortAfter(ReadAll(dir + "/coordinator.address"), "127.0.0.1:");
  const int worker0 = PortAfter(ReadAll(dir + "/logs/worker-0.log"), "worker transport on 127.0.0.1:");
  ASSERT_GT(coordinator, 0);
  ASSERT_GT(worker0, 0);
  std::vector<int> flood;
  for (const char* source : {"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"}) {
    for (int port : {coordinator, worker0}) {
      for (bool preface : {true, false}) {
        for (int fd : IdleConnections(source, port, 450, preface)) flood.push_back(fd);
      }
    }
  }
  std::cerr << "opened " << flood.size() << " idle connections\n";
  EXPECT_GT(flood.size(), 3000u);
  // The gates closed the silent ones and what was past their bounds, and
  // counted them where Prometheus reads them.
  auto refused = [&](int port, const std::string& reason, double at_least) {
    const std::string series = "shardline_connections_refused_total{reason=\"" + reason + "\"} ";
    const absl::Time until = absl::Now() + absl::Seconds(20);
    for (;;) {
      absl::StatusOr<std::string> page = HttpGet(port, "/metrics");
      const double v = page.ok() ? NumberAfter(*page, series) : -1;
      if (v >= at_least || absl::Now() > until) return v;
      absl::SleepFor(absl::Milliseconds(200));
    }
  };
  EXPECT_GE(refused(CoordinatorMetricsPort(dir), "silent", 500), 500);
  EXPECT_GE(refused(Worker0MetricsPort(dir), "silent", 500), 500);
  // What is asserted is that the coordinator answers, not how fast: status's
  // own 5 s deadline would be a timing on a shared 2-core machine, so it is
  // given 20 s; the lost listener of issue 62 never answers at all.
  const std::vector<std::string> status_argv = {BinPath("shardline"), "status", "--workdir", dir,
                                                "--timeout_seconds", "20"};
  for (int i = 0; i < 3; ++i) {
    Subprocess status(status_argv);
    EXPECT_EQ(status.Wait(absl::Seconds(40)), 0) << status.Output();
    absl::SleepFor(absl::Seconds(2));
  }
  ASSERT_FALSE(absl::StrContains(ReadAll(dir + "/logs/coordinator.log"), "job finished"))
      << "the job ended before the flood did: raise kSteps, or `after` below asks nobody";
  for (int fd : flood) close(fd);
  Subprocess after(status_argv);
  EXPECT_EQ(after.Wait(absl::Seconds(40)), 0) << after.Output();
  ASSERT_EQ(launch.Wait(absl::Seconds(240)), 0) << launch.Output();
  EXPECT_TRUE(SameBits(FinalState(dir, kSteps, 2), want)) << "the flood changed the bits";
  const std::string log = ReadAll(dir + "/logs/coordinator.log");
  EXPECT_EQ(log.find("generation 2"), std::string::npos) << "the flood broke a generation";
  EXPECT_EQ(log.find("Too many open files"), std::string::npos);
}

// `shardline credential --rank_offset K`: a second site's Indexed Job
// counts its workers from 0 (deploy/k8s/two-sites); their credentials are
// of ranks K and up. Bad offsets are refused naming the flag.
TEST(SecurityTest, ACredentialWithARankOffsetIsOfTheRankPlusTheOffset) {
  const std::string dir = FreshDir("security_credential_offset");
  ASSERT_TRUE(Env::Default()->CreateDirs(dir).ok());
  const std::string token = dir + "/token";
  std::ofstream(token) << "0123456789abcdef0123456789abcdef";
  ASSERT_EQ(chmod(token.c_str(), 0600), 0);
  Subprocess made({BinPath("shardline"), "credential", "--rank=1", "--rank_offset=2", "--out=" + dir + "/rank",
                   "--token_file=" + token});
  ASSERT_EQ(made.Wait(absl::Seconds(30)), 0) << made.Output();
  EXPECT_EQ(ReadAll(dir + "/rank").rfind("shardline-rank/3/", 0), 0u) << ReadAll(dir + "/rank");
  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"--rank=1", "--rank_offset=-2"}, std::vector<std::string>{"--reader", "--rank_offset=2"}}) {
    std::vector<std::string> argv = {BinPath("shardline"), "credential", "--out=" + dir + "/bad",
                                     "--token_file=" + token};
    argv.insert(argv.end(), bad.begin(), bad.end());
    Subprocess refused(argv);
    EXPECT_EQ(refused.Wait(absl::Seconds(30)), 1) << refused.Output();
    EXPECT_NE(refused.Output().find("--rank_offset"), std::string::npos) << refused.Output();
  }
}

// Issue 62: a reader's credential was accepted as --token_file by the
// coordinator and by launch (a rank's was refused). Every process that
// derives credentials from what it holds refuses both, naming the file.
TEST(SecurityTest, OnlyTheJobTokenItselfRunsACoordinatorALaunchOrMakesCredentials) {
  const std::string dir = FreshDir("security_token_kinds");
  ASSERT_TRUE(Env::Default()->CreateDirs(dir).ok());
  const std::string token = "0123456789abcdef0123456789abcdef";
  const std::string reader = dir + "/reader";
  const std::string rank = dir + "/rank-0";
  ASSERT_TRUE(WritePrivateFile(reader, ReaderCredentialText(token)).ok());
  ASSERT_TRUE(WritePrivateFile(rank, RankCredentialText(token, 0)).ok());
  for (const auto& [file, kind] : {std::pair<std::string, std::string>{reader, "a reader's credential"},
                                   std::pair<std::string, std::string>{rank, "rank 0's credential"}}) {
    const std::vector<std::vector<std::string>> commands = {
        {BinPath("shardline-coordinator"), "--config", DefaultConfig(), "--listen", "127.0.0.1:0", "--workdir",
         dir + "/coordinator", "--token_file", file},
        {BinPath("shardline"), "launch", "--config", DefaultConfig(), "--workers", "1", "--workdir", dir + "/launch",
         "--token_file", file},
        {BinPath("shardline"), "credential", "--rank", "1", "--out", dir + "/made", "--token_file", file},
    };
    for (const std::vector<std::string>& argv : commands) {
      Subprocess p(argv);
      EXPECT_EQ(p.Wait(absl::Seconds(30)), 1) << p.Output();
      EXPECT_NE(p.Output().find("--token_file " + file + " holds " + kind), std::string::npos) << p.Output();
      EXPECT_NE(p.Output().find("needs the job token itself"), std::string::npos) << p.Output();
    }
  }
  EXPECT_FALSE(Env::Default()->FileExists(dir + "/made"));
}

TEST(SecurityTest, WithTheTokenButNotAMemberNobodyCanSpeakForARank) {
  unsetenv(kTokenEnvVar);
  const std::string dir = FreshDir("security_member");
  Subprocess launch(LaunchArgv(dir, 2, {"train.total_steps=600", "train.eval_every=0"}));
  ASSERT_TRUE(WaitForText(dir + "/logs/worker-0.log", "first step of this generation", absl::Seconds(60)))
      << launch.Output();
  // The insider has the job's token (say, from a leaked environment).
  absl::StatusOr<std::string> token = LoadToken(Env::Default(), dir + "/token");
  ASSERT_TRUE(token.ok()) << token.status();
  RpcAuth insider(Env::Default(), *token);
  // A worker's stolen credential: rank 1's, from its credential file.
  absl::StatusOr<std::string> rank1 = LoadToken(Env::Default(), dir + "/credentials/rank-1");
  ASSERT_TRUE(rank1.ok()) << rank1.status();

  const std::string coordinator = ReadAll(dir + "/coordinator.address");
  auto stub = coordinator::Coordinator::NewStub(
      grpc::CreateCustomChannel(coordinator, grpc::InsecureChannelCredentials(), DefaultChannelArguments()));
  {  // take rank 0 with rank 1's credential: refused for the rank
    grpc::ClientContext ctx;
    AddProof(&ctx, coordinator, *rank1, RegisterMethod());
    coordinator::RegisterRequest req;
    req.set_transport_address("127.0.0.1:1");
    req.set_requested_rank(0);
    req.set_incarnation(98);
    coordinator::RegisterResponse world;
    EXPECT_EQ(stub->Register(&ctx, req, &world).error_code(), grpc::StatusCode::PERMISSION_DENIED);
    EXPECT_TRUE(world.config_text().empty());
  }
  {  // take rank 0: refused, and the refusal names no member's address
    grpc::ClientContext ctx;
    AddProof(&ctx, coordinator, *token, RegisterMethod());
    coordinator::RegisterRequest req;
    req.set_transport_address("127.0.0.1:1");
    req.set_requested_rank(0);
    req.set_incarnation(99);
    coordinator::RegisterResponse world;
    const grpc::Status s = stub->Register(&ctx, req, &world);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::ALREADY_EXISTS);
    EXPECT_EQ(s.error_message().find("127.0.0.1"), std::string::npos) << s.error_message();
    EXPECT_EQ(world.peers_size(), 0);
  }
  {  // speak for rank 0 on the heartbeat: fail the job
    grpc::ClientContext ctx;
    AddProof(&ctx, coordinator, *rank1, HeartbeatMethod());
    auto stream = stub->Heartbeat(&ctx);
    coordinator::WorkerReport forged;
    forged.set_rank(0);
    forged.set_generation(1);
    forged.set_member_secret("guess");
    forged.set_fatal_error("forged");
    stream->Write(forged);
    stream->WritesDone();
    EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::PERMISSION_DENIED);
  }
  // Feed rank 0 as rank 1, with the token but without rank 1's member tag.
  FeedWorker0(dir, &insider, MemberKeys{"guess", {}, {}});

  EXPECT_EQ(Rejected(CoordinatorMetricsPort(dir), "not_a_member"), 1);
  EXPECT_EQ(Rejected(CoordinatorMetricsPort(dir), "wrong_rank"), 1);
  EXPECT_GE(Rejected(Worker0MetricsPort(dir), "not_a_member", 1), 1);

  ASSERT_EQ(launch.Wait(absl::Seconds(240)), 0) << launch.Output();
  ExpectUndisturbed(dir, 600);
}

TEST(SecurityTest, FloodsOfFutureGenerationsAndOversizedFramesNeitherHangNorBloatAWorker) {
  unsetenv(kTokenEnvVar);
  const std::string dir = FreshDir("security_flood");
  Subprocess launch(LaunchArgv(dir, 2, {"train.total_steps=600", "train.eval_every=0"}));
  ASSERT_TRUE(WaitForText(dir + "/logs/worker-0.log", "first step of this generation", absl::Seconds(60)))
      << launch.Output();
  RpcAuth insider(Env::Default(), *LoadToken(Env::Default(), dir + "/token"));
  const int w0_transport = PortAfter(ReadAll(dir + "/logs/worker-0.log"), "worker transport on 127.0.0.1:");
  ASSERT_GT(w0_transport, 0);
  const std::string w0 = absl::StrCat("127.0.0.1:", w0_transport);
  const std::vector<pid_t> w0_pid = LaunchedWorker(dir, 0);
  ASSERT_EQ(w0_pid.size(), 1u);
  auto rss_mib = [&] { return NumberAfter(ReadAll(absl::StrCat("/proc/", w0_pid[0], "/status")), "VmRSS:") / 1024; };
  const double rss_before = rss_mib();
  TransportServerOptions options;
  options.auth = &insider;
  options.max_frame_bytes = 128 << 20;  // the rogue's own limit; the worker's is what counts
  // Forty streams whose first frame names generation 2 (once they held every
  // gRPC thread of the worker and training stopped for good).
  std::unique_ptr<TransportServer> rogue = *TransportServer::Start(Env::Default(), "127.0.0.1:0", options);
  std::vector<std::string> peers = {absl::StrCat("127.0.0.1:", rogue->port())};
  for (int i = 0; i < 40; ++i) peers.push_back(w0);
  std::unique_ptr<Transport> flood = *rogue->Connect(2, 0, peers);
  const char byte = 1;
  for (int p = 1; p <= 40; ++p) flood->Send(p, 5, absl::MakeConstSpan(&byte, 1), absl::Now() + absl::Seconds(5)).IgnoreError();
  // Six 64 MiB frames of the current generation (once +376 MiB held until
  // the generation ended).
  std::unique_ptr<TransportServer> rogue2 = *TransportServer::Start(Env::Default(), "127.0.0.1:0", options);
  std::unique_ptr<Transport> big = *rogue2->Connect(1, 1, {w0, absl::StrCat("127.0.0.1:", rogue2->port())});
  const std::string frame(64 << 20, 'z');
  for (uint64_t tag = 0; tag < 6; ++tag) {
    big->Send(0, 900 + tag, absl::MakeConstSpan(frame.data(), frame.size()), absl::Now() + absl::Seconds(5))
        .IgnoreError();
  }
  big->Flush(absl::Now() + absl::Seconds(20)).IgnoreError();

  // Training goes on meanwhile, and the worker's memory stays bounded: the
  // 384 MiB sent are neither delivered nor kept.
  const double rss_after = rss_mib();
  std::cerr << "worker 0 RSS " << rss_before << " MiB before the flood, " << rss_after << " MiB after\n";
  EXPECT_LT(rss_after - rss_before, 128) << "worker 0 grew from " << rss_before << " to " << rss_after << " MiB";
  flood.reset();
  rogue.reset();
  big.reset();
  rogue2.reset();
  ASSERT_EQ(launch.Wait(absl::Seconds(240)), 0) << launch.Output();
  ExpectUndisturbed(dir, 600);
}

TEST(SecurityTest, AJobOverMutualTlsTrainsAndRefusesPlainClients) {
  unsetenv(kTokenEnvVar);
  TestPki pki(::testing::TempDir() + "/security_pki");
  ASSERT_TRUE(pki.ok());
  const std::string dir = FreshDir("security_tls");
  std::vector<std::string> argv = LaunchArgv(dir, 2, {"train.total_steps=300", "train.eval_every=0"});
  for (const std::string& a : std::vector<std::string>{"--tls_cert", pki.File("server.pem"), "--tls_key",
                                                        pki.File("server.key"), "--tls_ca", pki.File("ca.pem")}) {
    argv.push_back(a);
  }
  Subprocess launch(argv);
  ASSERT_TRUE(WaitForText(dir + "/logs/worker-0.log", "first step of this generation", absl::Seconds(60)))
      << launch.Output();
  // A client without TLS (even with the token) does not get past the handshake.
  auto stub = coordinator::Coordinator::NewStub(grpc::CreateCustomChannel(
      ReadAll(dir + "/coordinator.address"), grpc::InsecureChannelCredentials(), DefaultChannelArguments()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  coordinator::JobStatus status;
  EXPECT_EQ(stub->Status(&ctx, coordinator::StatusRequest(), &status).error_code(), grpc::StatusCode::UNAVAILABLE);

  ASSERT_EQ(launch.Wait(absl::Seconds(240)), 0) << launch.Output();
  const std::vector<std::string> evals = SplitLines(dir + "/metrics.jsonl", "eval");
  ASSERT_FALSE(evals.empty());
  EXPECT_EQ(JsonField(evals.back(), "step"), 300);
  EXPECT_GT(JsonField(evals.back(), "accuracy"), 0.7);
}

// A process on the coordinator's old port that is not the coordinator: it
// answers Hello with made-up values and records every call and header.
class Impostor final : public coordinator::Coordinator::Service {
 public:
  grpc::Status Hello(grpc::ServerContext* ctx, const coordinator::HelloRequest* req,
                     coordinator::HelloReply* reply) override {
    Record("Hello", *ctx);
    reply->set_server_nonce(absl::StrCat(absl::ToUnixMicros(absl::Now()), "-", std::string(64, 'a')));
    reply->set_server_proof(std::string(64, 'b'));
    return grpc::Status::OK;
  }
  grpc::Status Register(grpc::ServerContext* ctx, const coordinator::RegisterRequest*,
                        coordinator::RegisterResponse*) override {
    Record("Register", *ctx);
    return grpc::Status::OK;
  }
  grpc::Status Status(grpc::ServerContext* ctx, const coordinator::StatusRequest*, coordinator::JobStatus*) override {
    Record("Status", *ctx);
    return grpc::Status::OK;
  }
  grpc::Status Heartbeat(grpc::ServerContext* ctx,
                         grpc::ServerReaderWriter<coordinator::CoordinatorCommand, coordinator::WorkerReport>*) override {
    Record("Heartbeat", *ctx);
    return grpc::Status::OK;
  }

  // Every call's name, then each of its headers as "name: value".
  std::vector<std::string> seen() {
    MutexLock lock(&mu_);
    return seen_;
  }

 private:
  void Record(const std::string& call, const grpc::ServerContext& ctx) {
    MutexLock lock(&mu_);
    seen_.push_back(call);
    for (const auto& [k, v] : ctx.client_metadata()) {
      seen_.push_back(absl::StrCat(std::string(k.data(), k.size()), ": ", std::string(v.data(), v.size())));
    }
  }
  Mutex mu_;
  std::vector<std::string> seen_ ABSL_GUARDED_BY(mu_);
};

// Issue 33, finding 2: `shardline status --workdir DIR` sent the job token
// to whatever process had taken the coordinator's old port. Now neither the
// status command nor a worker sends an impostor anything it could use: it
// gets a Hello with a random nonce, fails to prove it holds the token, and
// the client stops there, saying so.
TEST(SecurityTest, NothingIsSentToAProcessThatCannotProveItHoldsTheToken) {
  unsetenv(kTokenEnvVar);
  const std::string dir = FreshDir("security_impostor");
  ASSERT_TRUE(Env::Default()->CreateDirs(dir).ok());
  const std::string token = *NewToken();
  ASSERT_TRUE(WritePrivateFile(dir + "/token", token).ok());
  ASSERT_TRUE(WritePrivateFile(dir + "/rank-1", RankCredentialText(token, 1)).ok());
  Impostor impostor;
  GrpcServerOptions options;
  options.env = Env::Default();
  absl::StatusOr<GrpcServer> server = StartGrpcServer("127.0.0.1:0", {&impostor}, options);
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string address = absl::StrCat("127.0.0.1:", server->port);
  std::ofstream(dir + "/coordinator.address") << address;

  Subprocess status({std::string(SHARDLINE_BIN_DIR) + "/shardline", "status", "--workdir", dir});
  EXPECT_EQ(status.Wait(absl::Seconds(60)), 1) << status.Output();
  EXPECT_NE(status.Output().find("did not prove it holds this job's token"), std::string::npos) << status.Output();
  Subprocess worker({std::string(SHARDLINE_BIN_DIR) + "/shardline-worker", "--coordinator", address,
                     "--token_file", dir + "/rank-1", "--connect_timeout_seconds", "20"});
  EXPECT_EQ(worker.Wait(absl::Seconds(60)), 1) << worker.Output();
  EXPECT_NE(worker.Output().find("did not prove it holds this job's rank 1 credential"), std::string::npos)
      << worker.Output();

  const std::vector<std::string> seen = impostor.seen();
  int hellos = 0;
  for (const std::string& line : seen) {
    hellos += line == "Hello";
    EXPECT_TRUE(line == "Hello" || line.find(": ") != std::string::npos) << "the impostor got a call: " << line;
    EXPECT_EQ(line.find(token), std::string::npos) << line;
    EXPECT_EQ(line.find(KeyFor(token, 1)), std::string::npos) << line;
    EXPECT_EQ(line.find(kProofMetadataKey), std::string::npos) << line;
  }
  EXPECT_EQ(hellos, 2) << "one from each client, and nothing after";
  server->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
}

TEST(SecurityTest, AListenerBeyondLoopbackWithoutATokenRefusesToStart) {
  unsetenv(kTokenEnvVar);
  const std::string dir = FreshDir("security_insecure");
  // Refused before binding anything: nothing listens beyond loopback here.
  Subprocess coordinator({std::string(SHARDLINE_BIN_DIR) + "/shardline-coordinator", "--config", DefaultConfig(),
                          "--listen", "0.0.0.0:0", "--workdir", dir});
  EXPECT_EQ(coordinator.Wait(absl::Seconds(30)), 1);
  EXPECT_NE(coordinator.Output().find("--listen 0.0.0.0:0 is reachable beyond this host"), std::string::npos)
      << coordinator.Output();
  Subprocess worker({std::string(SHARDLINE_BIN_DIR) + "/shardline-worker", "--coordinator", "127.0.0.1:1",
                     "--listen", "0.0.0.0:0"});
  EXPECT_EQ(worker.Wait(absl::Seconds(30)), 1);
  EXPECT_NE(worker.Output().find("--listen 0.0.0.0:0 is reachable beyond this host"), std::string::npos)
      << worker.Output();
}

}  // namespace
}  // namespace shardline
