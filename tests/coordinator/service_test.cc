// The coordinator's gRPC service on loopback: what a worker or the launcher
// sees over the wire.
#include "coordinator/service.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>

#include "common/config.h"
#include "common/grpc_util.h"
#include "common/rpc_auth.h"
#include "tests/util/pki.h"
#include "coordinator/progress_line.h"

namespace shardline {
namespace {

class NoMetrics : public MetricsSink {
 public:
  absl::Status Write(const metrics::MetricRecord&) override { return absl::OkStatus(); }
};

// A coordinator for a world of one, served on loopback with `auth` (null:
// none; its credentials secure the port).
struct Served {
  explicit Served(const std::string& name, RpcAuth* auth = nullptr) {
    const std::string dir = ::testing::TempDir() + "/service_test_" + name;
    std::system(("rm -rf '" + dir + "'").c_str());
    store = *JobStore::Open(dir);
    CoordinatorOptions o;
    o.world_size = 1;
    job = std::make_unique<Job>(*ParseConfigText("train { total_steps: 10 }", "test"), store.get(), &sink, o);
    EXPECT_TRUE(job->Init().ok());
    service = std::make_unique<CoordinatorService>(job.get(), auth);
    server = *StartGrpcServer("127.0.0.1:0", {service.get()}, {}, kMaxMessageBytes,
                              auth != nullptr ? auth->ServerCredentials() : nullptr);
    address = "127.0.0.1:" + std::to_string(server.port);
  }
  ~Served() { server.server->Shutdown(); }
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
  RpcAuth auth("s3cret-token", [&](RejectReason r) { ++(r == RejectReason::kMissingToken ? missing : wrong); });
  Served served("token", &auth);
  Job& job = *served.job;
  auto stub = served.Stub();

  const RpcAuth none(""), bad("s3cret-tokem"), good("s3cret-token");
  coordinator::RegisterRequest req;
  req.set_transport_address("127.0.0.1:1");
  req.set_requested_rank(-1);
  req.set_incarnation(7);
  for (const RpcAuth* caller : {&none, &bad}) {
    {
      grpc::ClientContext ctx;
      caller->Attach(&ctx);
      coordinator::JobStatus st;
      EXPECT_EQ(stub->Status(&ctx, coordinator::StatusRequest(), &st).error_code(), grpc::StatusCode::UNAUTHENTICATED);
    }
    {
      grpc::ClientContext ctx;
      caller->Attach(&ctx);
      coordinator::RegisterResponse world;
      EXPECT_EQ(stub->Register(&ctx, req, &world).error_code(), grpc::StatusCode::UNAUTHENTICATED);
      EXPECT_TRUE(world.config_text().empty());  // nothing about the job leaks
    }
    {
      grpc::ClientContext ctx;
      caller->Attach(&ctx);
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
  good.Attach(&ctx);
  coordinator::RegisterResponse world;
  ASSERT_TRUE(stub->Register(&ctx, req, &world).ok());
  EXPECT_EQ(world.generation(), 1u);
  EXPECT_EQ(job.Snapshot().state(), coordinator::JobStatus::RUNNING);
}

TEST(CoordinatorServiceTest, MutualTlsAcceptsOnlyTheRightChain) {
  TestPki pki(::testing::TempDir() + "/service_test_pki");
  ASSERT_TRUE(pki.ok()) << "openssl failed";
  RpcAuth server_auth("");
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
    RpcAuth a("");
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
