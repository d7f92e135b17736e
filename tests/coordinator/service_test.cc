// The coordinator's gRPC service on loopback: what a worker or the launcher
// sees over the wire.
#include "coordinator/service.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <set>
#include <chrono>
#include <functional>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "common/checkpoint/checkpoint_dir.h"
#include "common/checkpoint/shard_file.h"
#include "common/job/config.h"
#include "common/net/grpc_util.h"
#include "grpcpp/generic/generic_stub.h"
#include "common/net/rpc_auth.h"
#include "common/platform/mutex.h"
#include "tests/util/pki.h"
#include "tests/coordinator/register_request.h"
#include "tests/util/fault_env.h"
#include "tests/util/proof.h"
#include "common/status/progress_line.h"
#include "proto/health.grpc.pb.h"

namespace shardline {
namespace {

class NoMetrics : public MetricsSink {
 public:
  absl::Status Write(const metrics::MetricRecord&) override { return absl::OkStatus(); }
};

// A coordinator for a world of `world_size`, served on loopback with
// `auth` (null: none; its credentials secure the port) by `rpc_threads`.
struct Served {
  explicit Served(const std::string& name, RpcAuth* auth = nullptr, int world_size = 1, int rpc_threads = 1,
                  const std::function<void(CoordinatorOptions*)>& tweak = nullptr) {
    const std::string dir = ::testing::TempDir() + "/service_test_" + name;
    std::system(("rm -rf '" + dir + "' '" + dir + "_ckpt'").c_str());
    store = *JobStore::Open(Env::Default(), dir);
    CoordinatorOptions o;
    o.env = Env::Default();
    o.world_size = world_size;
    if (tweak) tweak(&o);
    job = std::make_unique<Job>(*ParseConfigText("train { total_steps: 10 }", "test"), store.get(), &sink, o);
    EXPECT_TRUE(job->Init().ok());
    CoordinatorServiceOptions so;
    so.queues.threads = rpc_threads;
    service = std::make_unique<CoordinatorService>(job.get(), auth, nullptr, so);
    GrpcServerOptions options;
    options.env = Env::Default();
    if (auth != nullptr && auth->tls()) options.credentials = auth->ServerCredentials();
    server = *service->Listen("127.0.0.1:0", options);
    address = "127.0.0.1:" + std::to_string(server.port);
  }
  ~Served() {
    server.server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
    service->Stop();
  }
  // A stub over `creds` (default: plain TCP).
  std::unique_ptr<coordinator::Coordinator::Stub> Stub(
      std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials()) const {
    return coordinator::Coordinator::NewStub(grpc::CreateCustomChannel(address, creds, DefaultChannelArguments()));
  }

  std::unique_ptr<JobStore> store;
  NoMetrics sink;
  std::unique_ptr<Job> job;
  std::unique_ptr<CoordinatorService> service;
  GrpcServer server;
  std::string address;
};

TEST(CoordinatorServiceTest, StatusAndJobOverAreTypedOnTheWire) {
  Served served("typed");
  Job& job = *served.job;
  auto stub = served.Stub();

  auto status = [&] {
    grpc::ClientContext ctx;
    coordinator::JobStatus s;
    EXPECT_TRUE(stub->Status(&ctx, coordinator::StatusRequest(), &s).ok());
    return s;
  };
  EXPECT_EQ(status().state(), coordinator::JobStatus::FORMING);
  EXPECT_EQ(status().world_size(), 1);

  coordinator::RegisterRequest req;
  req.set_transport_address("127.0.0.1:1");
  req.set_requested_rank(-1);
  req.set_incarnation(7);
  std::string secret;
  {
    grpc::ClientContext ctx;
    coordinator::RegisterResponse world;
    ASSERT_TRUE(stub->Register(&ctx, req, &world).ok());
    EXPECT_FALSE(world.job_over());
    EXPECT_EQ(world.generation(), 1u);
    secret = world.member_secret();
    EXPECT_EQ(secret.size(), 64u);
    ASSERT_EQ(world.peer_tags_size(), 1);
    EXPECT_EQ(world.peer_tags(0), MemberTag(secret, 1, 0));
  }
  const coordinator::JobStatus running = status();
  EXPECT_EQ(running.state(), coordinator::JobStatus::RUNNING);
  EXPECT_EQ(running.generation(), 1u);
  EXPECT_FALSE(running.has_last_train());
  EXPECT_EQ(ProgressLine(running),
            "progress: step 0/0 | loss - | - samples/s | ETA - | workers 0/1 alive | generation 1 | running");

  job.RequestStop("test");
  coordinator::WorkerReport done;
  done.set_member_secret(secret);
  done.set_rank(0);
  done.set_generation(1);
  done.set_steps_done(4);
  done.set_finished(true);
  metrics::MetricRecord* m = done.add_metrics();
  m->set_step(4);
  m->set_split(metrics::MetricRecord::train);
  m->set_loss(0.25f);
  m->set_samples_per_second(1000);
  ASSERT_TRUE(job.Report(done).ok());
  const coordinator::JobStatus over = status();
  EXPECT_EQ(over.state(), coordinator::JobStatus::DONE);
  EXPECT_EQ(over.last_train().loss(), 0.25f);
  EXPECT_EQ(ProgressLine(over),
            "progress: step 4/0 | loss 0.2500 | 1000 samples/s | ETA - | workers 1/1 alive | generation 1 | done");
  {
    grpc::ClientContext ctx;
    coordinator::RegisterResponse late;
    ASSERT_TRUE(stub->Register(&ctx, req, &late).ok());
    EXPECT_TRUE(late.job_over());
    EXPECT_EQ(late.job_error(), "");
  }
}

TEST(CoordinatorServiceTest, EveryRpcWithoutTheJobTokenIsRefusedAndCounted) {
  std::atomic<int> missing{0}, wrong{0};
  RpcAuth auth(Env::Default(), "s3cret-token", [&](RejectReason r) { ++(r == RejectReason::kMissingToken ? missing : wrong); });
  Served served("token", &auth);
  Job& job = *served.job;
  auto stub = served.Stub();

  coordinator::RegisterRequest req;
  req.set_transport_address("127.0.0.1:1");
  req.set_requested_rank(-1);
  req.set_incarnation(7);
  for (const char* caller : {"", "s3cret-tokem"}) {
    {
      grpc::ClientContext ctx;
      AddProof(&ctx, served.address, caller, StatusMethod());
      coordinator::JobStatus st;
      EXPECT_EQ(stub->Status(&ctx, coordinator::StatusRequest(), &st).error_code(), grpc::StatusCode::UNAUTHENTICATED);
    }
    {
      grpc::ClientContext ctx;
      AddProof(&ctx, served.address, caller, RegisterMethod());
      coordinator::RegisterResponse world;
      EXPECT_EQ(stub->Register(&ctx, req, &world).error_code(), grpc::StatusCode::UNAUTHENTICATED);
      EXPECT_TRUE(world.config_text().empty());  // nothing about the job leaks
    }
    {
      grpc::ClientContext ctx;
      AddProof(&ctx, served.address, caller, HeartbeatMethod());
      auto stream = stub->Heartbeat(&ctx);
      coordinator::WorkerReport report;
      report.set_rank(0);
      report.set_generation(1);
      report.set_fatal_error("forged");
      stream->Write(report);
      stream->WritesDone();
      EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
    }
  }
  EXPECT_EQ(missing.load(), 3);
  EXPECT_EQ(wrong.load(), 3);
  // No forged call changed the job; the real member still joins.
  EXPECT_EQ(job.Snapshot().state(), coordinator::JobStatus::FORMING);
  grpc::ClientContext ctx;
  AddProof(&ctx, served.address, "s3cret-token", RegisterMethod());
  coordinator::RegisterResponse world;
  ASSERT_TRUE(stub->Register(&ctx, req, &world).ok());
  EXPECT_EQ(world.generation(), 1u);
  EXPECT_EQ(job.Snapshot().state(), coordinator::JobStatus::RUNNING);
}

// Issue 46: a squatter on a stale coordinator.address relayed `shardline
// status`'s Hello to the real coordinator, kept the proof the status call
// carried, and registered with it (rank 1, the member secret, the peers).
// Now a proof is bound to its method and used once, and status proves only
// a reader's credential, which may read and nothing else.
TEST(CoordinatorServiceTest, ARelayedProofCanNeitherRegisterNorBeUsedTwice) {
  std::map<RejectReason, int> refused;
  Mutex refused_mu;
  RpcAuth auth(Env::Default(), "s3cret-token", [&](RejectReason r) {
    MutexLock lock(&refused_mu);
    ++refused[r];
  });
  Served served("relay", &auth);
  Job& job = *served.job;
  auto stub = served.Stub();
  const coordinator::RegisterRequest req = RegisterReq(-1, 7);
  auto call_register = [&](const std::string& header) {
    grpc::ClientContext ctx;
    if (!header.empty()) ctx.AddMetadata(kProofMetadataKey, header);
    coordinator::RegisterResponse world;
    const grpc::Status s = stub->Register(&ctx, req, &world);
    EXPECT_TRUE(s.ok() || world.member_secret().empty());
    return s.error_code();
  };
  auto call_status = [&](const std::string& header) {
    grpc::ClientContext ctx;
    ctx.AddMetadata(kProofMetadataKey, header);
    coordinator::JobStatus st;
    return stub->Status(&ctx, coordinator::StatusRequest(), &st).error_code();
  };
  // What the relay keeps: the header of a status call, with the token's
  // key (an old `status`) and with the reader's (today's).
  const std::string token_status = ProofHeader(served.address, "s3cret-token", StatusMethod());
  const std::string reader_status =
      ProofHeader(served.address, ReaderCredentialText("s3cret-token"), StatusMethod());
  ASSERT_FALSE(token_status.empty());
  ASSERT_FALSE(reader_status.empty());
  EXPECT_EQ(call_register(token_status), grpc::StatusCode::UNAUTHENTICATED);  // bound to Status
  EXPECT_EQ(call_register(reader_status), grpc::StatusCode::UNAUTHENTICATED);
  // A reader's proof made for Register is refused for what it is.
  EXPECT_EQ(call_register(ProofHeader(served.address, ReaderCredentialText("s3cret-token"), RegisterMethod())),
            grpc::StatusCode::PERMISSION_DENIED);
  // The reader reads; its proof then is spent, as is every proof.
  EXPECT_EQ(call_status(reader_status), grpc::StatusCode::OK);
  EXPECT_EQ(call_status(reader_status), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(job.Snapshot().state(), coordinator::JobStatus::FORMING) << "nothing registered";
  // The honest worker's Register proof works once; its replay does not.
  const std::string honest = ProofHeader(served.address, "s3cret-token", RegisterMethod());
  EXPECT_EQ(call_register(honest), grpc::StatusCode::OK);
  EXPECT_EQ(job.Snapshot().state(), coordinator::JobStatus::RUNNING);
  EXPECT_EQ(call_register(honest), grpc::StatusCode::UNAUTHENTICATED);
  MutexLock lock(&refused_mu);
  EXPECT_EQ(refused[RejectReason::kWrongToken], 2);
  EXPECT_EQ(refused[RejectReason::kReadOnly], 1);
  EXPECT_EQ(refused[RejectReason::kReplayedProof], 2);
}

// Sends `bytes` as the request of the unary `method` ("/pkg.Service/Name")
// to `address`, with `auth`'s token; the call's status.
grpc::Status RawUnary(const std::string& address, const std::string& method, const std::string& bytes,
                      const std::string& secret) {
  grpc::GenericStub stub(grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(),
                                                   DefaultChannelArguments()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  AddProof(&ctx, address, secret, MethodOfPath(method));
  grpc::Slice slice(bytes);
  grpc::ByteBuffer request(&slice, 1);
  grpc::CompletionQueue cq;
  std::unique_ptr<grpc::GenericClientAsyncResponseReader> call = stub.PrepareUnaryCall(&ctx, method, request, &cq);
  call->StartCall();
  grpc::ByteBuffer response;
  grpc::Status status;
  call->Finish(&response, &status, reinterpret_cast<void*>(1));
  void* tag = nullptr;
  bool ok = false;
  EXPECT_TRUE(cq.Next(&tag, &ok));
  return status;
}

// The process's peak resident memory (VmHWM) in bytes, after resetting it
// to the current resident size when `reset`.
int64_t PeakRss(bool reset) {
  if (reset) {
    FILE* f = fopen("/proc/self/clear_refs", "w");
    if (f != nullptr) {
      fputs("5", f);
      fclose(f);
    }
  }
  FILE* f = fopen("/proc/self/status", "r");
  char line[256];
  int64_t kb = -1;
  while (f != nullptr && fgets(line, sizeof(line), f) != nullptr) {
    if (strncmp(line, "VmHWM:", 6) == 0) kb = std::atoll(line + 6);
  }
  if (f != nullptr) fclose(f);
  return kb * 1024;
}

// Issue 33, finding 4: a 16 MiB Register of empty repeated fields, without
// a token, was parsed (~480 MiB) before it was refused. Now its bytes are
// all it costs; with the token, bytes that are not a RegisterRequest are
// INVALID_ARGUMENT and change nothing.
TEST(CoordinatorServiceTest, ARequestIsParsedOnlyAfterItsTokenIsChecked) {
  std::atomic<int> refused{0};
  RpcAuth auth(Env::Default(), "s3cret-token", [&](RejectReason) { ++refused; });
  Served served("parse_after_auth", &auth);
  std::string empties;
  empties.reserve(16 << 20);
  while (empties.size() + 2 <= (16u << 20)) empties += std::string("\x3a\x00", 2);  // held_snapshots {}
  const std::string none, good = "s3cret-token";
  const int64_t before = PeakRss(/*reset=*/true);
  ASSERT_GT(before, 0);
  EXPECT_EQ(RawUnary(served.address, "/shardline.coordinator.Coordinator/Register", empties, none).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  const int64_t grown = PeakRss(false) - before;
  EXPECT_LT(grown, int64_t{160} << 20) << "peak RSS grew by " << (grown >> 20) << " MiB";
  EXPECT_EQ(refused.load(), 1);

  EXPECT_EQ(RawUnary(served.address, "/shardline.coordinator.Coordinator/Register", "\xff\xff\xff", good).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(RawUnary(served.address, "/shardline.coordinator.Coordinator/Status", "\x0a\xff", good).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(served.job->Snapshot().state(), coordinator::JobStatus::FORMING);
}

// Issue 33, finding 3: a token holder registered rank 1 as soon as the
// coordinator listened, before the real worker, and became a member. A rank
// credential registers only its own rank, while the world forms too; the
// job token (the operator's) may still register any.
TEST(CoordinatorServiceTest, ARankCredentialRegistersOnlyItsOwnRankEvenWhileTheWorldForms) {
  std::atomic<int> wrong_rank{0};
  RpcAuth auth(Env::Default(), "s3cret-token", [&](RejectReason r) { wrong_rank += r == RejectReason::kWrongRank; });
  Served served("rank_credential", &auth, /*world_size=*/2);
  auto stub = served.Stub();
  const std::string rank1 = RankCredentialText("s3cret-token", 1);
  auto register_as = [&](const std::string& secret, int rank, uint64_t incarnation) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    AddProof(&ctx, served.address, secret, RegisterMethod());
    coordinator::RegisterRequest req;
    req.set_transport_address("127.0.0.1:1");
    req.set_requested_rank(rank);
    req.set_incarnation(incarnation);
    coordinator::RegisterResponse world;
    const grpc::Status s = stub->Register(&ctx, req, &world);
    EXPECT_TRUE(world.config_text().empty());
    return s;
  };
  for (int rank : {0, -1}) {
    const grpc::Status s = register_as(rank1, rank, 9);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << rank;
    EXPECT_NE(s.error_message().find("rank 1's credential"), std::string::npos) << s.error_message();
  }
  EXPECT_EQ(wrong_rank.load(), 2);
  EXPECT_EQ(served.job->Snapshot().state(), coordinator::JobStatus::FORMING);
  EXPECT_EQ(served.job->Snapshot().workers_size(), 0) << "a refused claim holds no slot";
  // Its own rank it may claim: the call waits for the world (deadline).
  EXPECT_EQ(register_as(rank1, 1, 10).error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  // A credential for a rank made from another token proves nothing.
  EXPECT_EQ(register_as(RankCredentialText("other-token", 0), 0, 11).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
}

TEST(CoordinatorServiceTest, MutualTlsAcceptsOnlyTheRightChain) {
  TestPki pki(::testing::TempDir() + "/service_test_pki");
  ASSERT_TRUE(pki.ok()) << "openssl failed";
  RpcAuth server_auth(Env::Default(), "");
  server_auth.set_tls(pki.Pem("server"));
  Served served("tls", &server_auth);
  auto status_with = [&](std::shared_ptr<grpc::ChannelCredentials> creds) {
    auto stub = served.Stub(creds);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    coordinator::JobStatus st;
    return stub->Status(&ctx, coordinator::StatusRequest(), &st);
  };
  auto client = [&](const std::string& leaf, const std::string& ca = "ca") {
    RpcAuth a(Env::Default(), "");
    a.set_tls(pki.Pem(leaf, ca));
    return a.ChannelCredentials();
  };
  EXPECT_TRUE(status_with(client("client")).ok());
  // A client certificate from another CA, an expired one, none at all, and
  // no TLS: all refused in the handshake.
  EXPECT_EQ(status_with(client("stranger", "ca")).error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(status_with(client("expired")).error_code(), grpc::StatusCode::UNAVAILABLE);
  grpc::SslCredentialsOptions no_cert;
  no_cert.pem_root_certs = pki.Pem("client").ca;
  EXPECT_EQ(status_with(grpc::SslCredentials(no_cert)).error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(status_with(grpc::InsecureChannelCredentials()).error_code(), grpc::StatusCode::UNAVAILABLE);
  // And the client refuses a server whose certificate its CA did not sign.
  EXPECT_EQ(status_with(client("client", "other_ca")).error_code(), grpc::StatusCode::UNAVAILABLE);
}

}  // namespace
}  // namespace shardline

namespace shardline {
namespace {

coordinator::RegisterRequest Joiner(uint64_t incarnation) {
  coordinator::RegisterRequest req;
  req.set_transport_address("127.0.0.1:1");
  req.set_requested_rank(-1);
  req.set_incarnation(incarnation);
  return req;
}

// Kubernetes' gRPC probe carries no job token: Check answers without one,
// as gRPC's own health service did before the coordinator served its own.
TEST(CoordinatorServiceTest, HealthCheckNeedsNoTokenAndWatchIsRefusedNotLeftHanging) {
  RpcAuth auth(Env::Default(), "s3cret-token");
  Served served("health", &auth);
  auto health = grpc::health::v1::Health::NewStub(
      grpc::CreateCustomChannel(served.address, grpc::InsecureChannelCredentials(), DefaultChannelArguments()));
  for (const std::string name : {"", "shardline.coordinator.Coordinator"}) {
    grpc::ClientContext ctx;
    grpc::health::v1::HealthCheckRequest req;
    req.set_service(name);
    grpc::health::v1::HealthCheckResponse resp;
    ASSERT_TRUE(health->Check(&ctx, req, &resp).ok()) << name;
    EXPECT_EQ(resp.status(), grpc::health::v1::HealthCheckResponse::SERVING) << name;
  }
  {
    grpc::ClientContext ctx;
    grpc::health::v1::HealthCheckRequest req;
    req.set_service("no.such.Service");
    grpc::health::v1::HealthCheckResponse resp;
    EXPECT_EQ(health->Check(&ctx, req, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  }
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    auto watch = health->Watch(&ctx, grpc::health::v1::HealthCheckRequest());
    grpc::health::v1::HealthCheckResponse resp;
    EXPECT_FALSE(watch->Read(&resp));
    EXPECT_EQ(watch->Finish().error_code(), grpc::StatusCode::UNIMPLEMENTED);
  }
}

// A registration answered only once the world forms: a caller that gives
// up first withdraws its claim, and the world then forms without it.
TEST(CoordinatorServiceTest, ARegistrationWhoseCallerGivesUpWithdrawsItsClaim) {
  Served served("withdraw", nullptr, /*world_size=*/2);
  auto stub = served.Stub();
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(300));
    coordinator::RegisterResponse world;
    EXPECT_EQ(stub->Register(&ctx, Joiner(1), &world).error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  }
  // The claim goes when the server sees the call end (bounded wait).
  const absl::Time until = absl::Now() + absl::Seconds(20);
  while (served.job->Snapshot().workers_registered() != 0 && absl::Now() < until) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_EQ(served.job->Snapshot().workers_registered(), 0);
  // Two others form the world, with ranks 0 and 1: the one that left holds none.
  std::vector<int> ranks(2, -1);
  std::vector<std::thread> joiners;
  for (int i = 0; i < 2; ++i) {
    joiners.emplace_back([&, i] {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
      coordinator::RegisterResponse world;
      if (stub->Register(&ctx, Joiner(10 + i), &world).ok()) ranks[i] = world.rank();
    });
  }
  for (std::thread& t : joiners) t.join();
  std::sort(ranks.begin(), ranks.end());
  EXPECT_EQ(ranks, (std::vector<int>{0, 1}));
  EXPECT_EQ(served.job->Snapshot().state(), coordinator::JobStatus::RUNNING);
}

// A member whose stream breaks (its process died) is lost at once, not at
// its heartbeat deadline: the world breaks.
TEST(CoordinatorServiceTest, ABrokenHeartbeatStreamBreaksTheWorldAtOnce) {
  Served served("broken", nullptr, /*world_size=*/1);
  auto stub = served.Stub();
  grpc::ClientContext reg;
  coordinator::RegisterResponse world;
  ASSERT_TRUE(stub->Register(&reg, Joiner(1), &world).ok());
  ASSERT_EQ(served.job->Snapshot().generation(), 1u);
  grpc::ClientContext ctx;
  auto stream = stub->Heartbeat(&ctx);
  coordinator::WorkerReport report = MemberReport(world);
  ASSERT_TRUE(stream->Write(report));
  const absl::Time until = absl::Now() + absl::Seconds(20);
  while (served.job->Snapshot().workers_alive() != 1 && absl::Now() < until) absl::SleepFor(absl::Milliseconds(10));
  ASSERT_EQ(served.job->Snapshot().workers_alive(), 1);
  ctx.TryCancel();
  while (served.job->Snapshot().state() == coordinator::JobStatus::RUNNING && absl::Now() < until) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  // Long before the heartbeat deadline (the test's 20 s bound is only a
  // bound): broken, waiting for its members again.
  EXPECT_EQ(served.job->Snapshot().state(), coordinator::JobStatus::FORMING);
  EXPECT_EQ(served.job->Snapshot().worker_losses(), 1);
}

// The coordinator's disk thread, through the real service on one RPC
// thread: a heartbeat report that completes a save queues its commit, and
// while that commit is stalled on the disk the same RPC thread still
// answers - a Status call (bounded by its deadline, not timed) and the
// member's next reports. Before the disk thread, the commit ran on the
// polling thread and every RPC of the job waited for the disk.
TEST(CoordinatorServiceTest, ACommitStalledOnDiskHoldsUpNoRpc) {
  FaultEnv env;
  const std::string root = ::testing::TempDir() + "/service_test_stalled_ckpt";
  Served served("stalled", nullptr, /*world_size=*/1, /*rpc_threads=*/1, [&](CoordinatorOptions* o) {
    o->env = &env;
    o->checkpoint_root = root;
    o->disk_thread = true;
  });
  auto stub = served.Stub();
  grpc::ClientContext reg;
  coordinator::RegisterResponse world;
  ASSERT_TRUE(stub->Register(&reg, Joiner(1), &world).ok());
  ASSERT_TRUE(env.CreateDirs(StepDir(root, 5)).ok());
  const std::string file = ShardFileName(0, 1);
  ASSERT_TRUE(WriteFileAtomically(&env, StepDir(root, 5) + "/" + file, "abcd").ok());

  env.StallDisk();
  grpc::ClientContext ctx;
  auto stream = stub->Heartbeat(&ctx);
  coordinator::WorkerReport report = MemberReport(world);
  report.set_steps_done(5);
  report.set_total_steps(10);
  coordinator::SavedShard* saved = report.add_saved();
  saved->set_step(5);
  saved->set_world_size(1);
  saved->set_file(file);
  saved->set_size(4);
  ASSERT_TRUE(stream->Write(report));
  ASSERT_TRUE(env.stalled().WaitForNotificationWithTimeout(absl::Seconds(30))) << "the commit never reached the disk";

  grpc::ClientContext status_ctx;
  status_ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  coordinator::JobStatus status;
  const grpc::Status answered = stub->Status(&status_ctx, coordinator::StatusRequest(), &status);
  EXPECT_TRUE(answered.ok()) << "Status waited on a stalled disk: " << answered.error_message();
  EXPECT_EQ(status.last_checkpoint_step(), 0);
  coordinator::WorkerReport next = report;
  next.clear_saved();
  next.set_steps_done(6);
  ASSERT_TRUE(stream->Write(next));
  const absl::Time until = absl::Now() + absl::Seconds(20);
  while (served.job->Snapshot().global_step() < 6 && absl::Now() < until) absl::SleepFor(absl::Milliseconds(10));
  EXPECT_EQ(served.job->Snapshot().global_step(), 6) << "a report waited on a stalled disk";

  env.ReleaseDisk();
  while (served.job->Snapshot().last_checkpoint_step() != 5 && absl::Now() < until + absl::Seconds(20)) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(served.job->Snapshot().last_checkpoint_step(), 5);
  EXPECT_TRUE(env.FileExists(StepDir(root, 5) + "/COMMITTED"));
  ctx.TryCancel();
}

// Several RPC threads, each with its own queue: a world of 24 registers at
// once, every member's stream is served (whichever queue took it), and each
// member's break is seen.
TEST(CoordinatorServiceTest, AWorldOnThreeRpcThreadsFormsAndEveryStreamIsServed) {
  constexpr int kWorld = 24;
  Served served("threads", nullptr, kWorld, /*rpc_threads=*/3);
  auto stub = served.Stub();
  std::vector<coordinator::RegisterResponse> worlds(kWorld);
  std::vector<char> joined(kWorld, 0);  // not vector<bool>: its elements share bytes, and 24 threads write them
  {
    std::vector<std::thread> joiners;
    for (int i = 0; i < kWorld; ++i) {
      joiners.emplace_back([&, i] {
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
        joined[i] = stub->Register(&ctx, Joiner(100 + i), &worlds[i]).ok();
      });
    }
    for (std::thread& t : joiners) t.join();
  }
  std::set<int> ranks;
  for (int i = 0; i < kWorld; ++i) {
    ASSERT_TRUE(joined[i]) << "worker " << i;
    ranks.insert(worlds[i].rank());
  }
  EXPECT_EQ(ranks.size(), static_cast<size_t>(kWorld));
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::ClientReaderWriter<coordinator::WorkerReport, coordinator::CoordinatorCommand>>>
      streams;
  for (int i = 0; i < kWorld; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    streams.push_back(stub->Heartbeat(contexts.back().get()));
    coordinator::WorkerReport report;
    report.set_rank(worlds[i].rank());
    report.set_generation(worlds[i].generation());
    report.set_member_secret(worlds[i].member_secret());
    ASSERT_TRUE(streams.back()->Write(report)) << "worker " << i;
  }
  const absl::Time until = absl::Now() + absl::Seconds(30);
  while (served.job->Snapshot().workers_alive() != kWorld && absl::Now() < until) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(served.job->Snapshot().workers_alive(), kWorld);
  EXPECT_EQ(served.service->open_streams(), static_cast<size_t>(kWorld));
  // One member dies: the world breaks, and every other member is told to
  // join the next generation on its own stream.
  contexts[0]->TryCancel();
  for (int i = 1; i < kWorld; ++i) {
    coordinator::CoordinatorCommand c;
    bool told = false;
    while (!told && streams[i]->Read(&c)) told = c.new_generation() > 0;
    EXPECT_TRUE(told) << "worker " << i;
    contexts[i]->TryCancel();
  }
  EXPECT_EQ(served.job->Snapshot().state(), coordinator::JobStatus::FORMING);
}

}  // namespace
}  // namespace shardline
