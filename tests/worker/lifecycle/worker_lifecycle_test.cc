// The worker's lifecycle against an in-process coordinator that follows a
// script: it hands out worlds, records every report, and answers reports
// with commands. The worker is the real one (real gRPC on loopback, the real
// data set, real training); only the coordinator and, where a peer is
// needed, the peer are stand-ins.
#include "worker/lifecycle/worker_lifecycle.h"

#include <atomic>
#include <deque>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/checkpoint/checkpoint_dir.h"
#include "common/checkpoint/shard_file.h"
#include "common/job/config.h"
#include "common/platform/env.h"
#include "common/platform/mutex.h"
#include "google/protobuf/text_format.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/coordinator.grpc.pb.h"

namespace shardline {
namespace {

using coordinator::CoordinatorCommand;
using coordinator::RegisterRequest;
using coordinator::RegisterResponse;
using coordinator::WorkerReport;

constexpr char kDefaultConfig[] = SHARDLINE_SOURCE_DIR "/deploy/configs/fmnist_mlp.textproto";

class FakeCoordinator final : public coordinator::Coordinator::Service {
 public:
  // Answers a report with a command, or not.
  using Responder = std::function<std::optional<CoordinatorCommand>(const WorkerReport&)>;

  FakeCoordinator() {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
  }
  ~FakeCoordinator() override { server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5)); }

  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }

  // The next registration gets `world`; once the script is used up, every
  // registration is told the job is over.
  void Script(RegisterResponse world) {
    MutexLock lock(&mu_);
    script_.push_back(std::move(world));
  }
  void SetResponder(Responder r) {
    MutexLock lock(&mu_);
    responder_ = std::move(r);
  }
  // From now on heartbeat streams are not ended when the worker closes its
  // side: a coordinator paused or cut off, until Resume().
  void PauseAtStreamEnd() { paused_ = true; }
  void Resume() { resumed_.Notify(); }

  grpc::Status Register(grpc::ServerContext*, const RegisterRequest* request, RegisterResponse* response) override {
    MutexLock lock(&mu_);
    registrations_.push_back(*request);
    if (script_.empty()) {
      response->set_job_over(true);  // finished
    } else {
      *response = script_.front();
      script_.pop_front();
    }
    return grpc::Status::OK;
  }

  grpc::Status Heartbeat(grpc::ServerContext*,
                         grpc::ServerReaderWriter<CoordinatorCommand, WorkerReport>* stream) override {
    WorkerReport report;
    bool finished = false;
    while (stream->Read(&report)) {
      finished = report.finished();
      Responder responder;
      {
        MutexLock lock(&mu_);
        reports_.push_back(report);
        responder = responder_;
      }
      if (responder) {
        if (std::optional<CoordinatorCommand> c = responder(report)) stream->Write(*c);
      }
    }
    if (paused_) {
      resumed_.WaitForNotificationWithTimeout(absl::Seconds(120));
    } else if (finished) {
      CoordinatorCommand done;  // a world of one: this worker finishing ends the job
      done.set_job_done(true);
      stream->Write(done);
    }
    return grpc::Status::OK;
  }

  // Waits up to `timeout` for a report that satisfies `pred`.
  bool AwaitReport(const std::function<bool(const WorkerReport&)>& pred, absl::Duration timeout) {
    MutexLock lock(&mu_);
    auto seen = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      for (const WorkerReport& r : reports_) {
        if (pred(r)) return true;
      }
      return false;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&seen), timeout);
  }
  std::vector<RegisterRequest> registrations() {
    MutexLock lock(&mu_);
    return registrations_;
  }
  std::vector<WorkerReport> reports() {
    MutexLock lock(&mu_);
    return {reports_.begin(), reports_.end()};
  }

 private:
  int port_ = 0;
  std::atomic<bool> paused_{false};
  Notification resumed_;
  std::unique_ptr<grpc::Server> server_;
  Mutex mu_;
  std::deque<RegisterResponse> script_ ABSL_GUARDED_BY(mu_);
  Responder responder_ ABSL_GUARDED_BY(mu_);
  std::vector<RegisterRequest> registrations_ ABSL_GUARDED_BY(mu_);
  std::deque<WorkerReport> reports_ ABSL_GUARDED_BY(mu_);
};

class WorkerLifecycleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = *TransportServer::Start(Env::Default(), "127.0.0.1:0");
    options_.env = Env::Default();
    options_.coordinator = coordinator_.address();
    options_.transport_address = absl::StrCat("127.0.0.1:", server_->port());
    options_.connect_timeout = absl::Seconds(10);
    options_.heartbeat_interval = absl::Milliseconds(20);
    options_.on_still_stuck = [this] { still_stuck_ = true; };
    root_ = ::testing::TempDir() + "/worker_lifecycle_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::system(("rm -rf '" + root_ + "'").c_str());
  }

  // The default job cut to `steps` steps, then `overrides`, as text.
  static std::string ConfigText(int steps, const std::vector<std::string>& overrides = {}) {
    config::JobConfig c = *LoadConfig(Env::Default(), kDefaultConfig, {});
    c.mutable_train()->set_total_steps(steps);
    c.mutable_train()->set_log_every(1);
    c.mutable_train()->set_eval_every(0);
    for (const std::string& o : overrides) EXPECT_TRUE(ApplyOverride(o, &c).ok()) << o;
    EXPECT_TRUE(ValidateConfig(c).ok()) << ValidateConfig(c);
    std::string text;
    google::protobuf::TextFormat::PrintToString(c, &text);
    return text;
  }

  // Generation `generation` with this worker as rank 0 of `peers` (itself
  // first).
  RegisterResponse World(uint64_t generation, const std::string& config_text,
                         const std::vector<std::string>& others = {}) {
    RegisterResponse w;
    w.set_rank(0);
    w.set_world_size(1 + static_cast<int>(others.size()));
    w.set_generation(generation);
    w.set_job_id("lifecycle-test");
    w.set_config_text(config_text);
    w.add_peers(options_.transport_address);
    for (const std::string& p : others) w.add_peers(p);
    w.set_checkpoint_root(root_);
    return w;
  }

  FakeCoordinator coordinator_;
  std::unique_ptr<TransportServer> server_;
  WorkerOptions options_;
  std::string root_;
  std::atomic<bool> still_stuck_{false};
};

// Exit 0 means the job finished: a worker told the job failed returns the
// coordinator's reason (its process exits 1), so a supervisor that sees
// every worker exit 0 may take the job as done (issue 34, finding 1).
TEST_F(WorkerLifecycleTest, AWorkerToldTheJobFailedReturnsTheReason) {
  RegisterResponse over;
  over.set_job_over(true);
  over.set_job_error("no checkpoint of this job can be restored");
  coordinator_.Script(over);
  const absl::Status s = RunWorker(options_, server_.get());
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "the job failed: no checkpoint of this job can be restored")) << s;
}

TEST_F(WorkerLifecycleTest, ACoordinatorThatSaysTheJobIsOverEndsTheWorkerCleanly) {
  options_.requested_rank = 4;
  EXPECT_TRUE(RunWorker(options_, server_.get()).ok());
  const std::vector<RegisterRequest> regs = coordinator_.registrations();
  ASSERT_EQ(regs.size(), 1u);
  EXPECT_EQ(regs[0].requested_rank(), 4);
  EXPECT_EQ(regs[0].previous_generation(), 0u);
  EXPECT_EQ(regs[0].transport_address(), options_.transport_address);
  EXPECT_TRUE(coordinator_.reports().empty());
}

TEST_F(WorkerLifecycleTest, TrainsToTheEndAndReportsTheRunAndItsCheckpoint) {
  coordinator_.Script(World(1, ConfigText(3)));
  ASSERT_TRUE(RunWorker(options_, server_.get()).ok());

  const std::vector<WorkerReport> reports = coordinator_.reports();
  ASSERT_FALSE(reports.empty());
  EXPECT_TRUE(reports.back().finished());
  EXPECT_EQ(reports.back().steps_done(), 3);
  int train_records = 0;
  bool final_shard = false;
  for (const WorkerReport& r : reports) {
    EXPECT_EQ(r.generation(), 1u);
    EXPECT_TRUE(r.fatal_error().empty());
    for (const metrics::MetricRecord& m : r.metrics()) train_records += m.split() == metrics::MetricRecord::train;
    for (const coordinator::SavedShard& s : r.saved()) {
      final_shard |= s.step() == 3 && s.world_size() == 1 && s.file() == ShardFileName(0, 1);
    }
  }
  EXPECT_EQ(train_records, 3);  // log_every 1: one line per step, each sent exactly once
  EXPECT_TRUE(final_shard);
  EXPECT_EQ(coordinator_.registrations().size(), 1u);  // finished: no second registration
}

TEST_F(WorkerLifecycleTest, AFinishedWorkerDoesNotWaitForeverOnAPausedCoordinator) {
  coordinator_.Script(World(1, ConfigText(3)));
  coordinator_.PauseAtStreamEnd();
  options_.heartbeat_close_timeout = absl::Milliseconds(500);
  // Returns although the coordinator never ends the stream (it is resumed
  // only afterwards; a bound, not a timing: without the close timeout the
  // worker would wait for it). The run finished but its end was never
  // confirmed, so the worker registers again rather than exit, and exits
  // cleanly when that registration says the job is over.
  Notification returned;
  absl::Status result;
  std::thread worker([&] {
    result = RunWorker(options_, server_.get());
    returned.Notify();
  });
  const bool in_time = returned.WaitForNotificationWithTimeout(absl::Seconds(60));
  coordinator_.Resume();
  worker.join();
  EXPECT_TRUE(in_time) << "the worker waited for a paused coordinator to end its stream";
  EXPECT_TRUE(result.ok()) << result;
  ASSERT_FALSE(coordinator_.reports().empty());
  EXPECT_TRUE(coordinator_.reports().back().finished());
  const std::vector<RegisterRequest> regs = coordinator_.registrations();
  ASSERT_EQ(regs.size(), 2u);
  EXPECT_EQ(regs[1].previous_generation(), 1u);
  EXPECT_NE(regs[1].reason().find("not confirmed"), std::string::npos) << regs[1].reason();
}

TEST_F(WorkerLifecycleTest, ABadCheckpointIsReportedAndTheWorkerRegistersAgain) {
  // A "committed" checkpoint whose manifest is garbage.
  const std::string dir = StepDir(root_, 10);
  ASSERT_TRUE(Env::Default()->CreateDirs(dir).ok());
  std::ofstream(dir + "/" + kCommittedFile) << "not a manifest {{{";
  RegisterResponse w = World(1, ConfigText(20));
  w.set_restore_dir(dir);
  w.set_start_step(10);
  coordinator_.Script(w);

  ASSERT_TRUE(RunWorker(options_, server_.get()).ok());  // the second registration is told the job is over
  bool reported = false;
  for (const WorkerReport& r : coordinator_.reports()) {
    if (r.bad_checkpoint_step() == 0) continue;
    reported = true;
    EXPECT_EQ(r.bad_checkpoint_step(), 10);
    EXPECT_NE(r.bad_checkpoint_reason().find(kCommittedFile), std::string::npos) << r.bad_checkpoint_reason();
    EXPECT_FALSE(r.finished());
  }
  EXPECT_TRUE(reported);
  const std::vector<RegisterRequest> regs = coordinator_.registrations();
  ASSERT_EQ(regs.size(), 2u);
  EXPECT_EQ(regs[1].previous_generation(), 1u);
  EXPECT_EQ(regs[1].requested_rank(), 0);  // keeps its rank
  EXPECT_EQ(regs[1].incarnation(), regs[0].incarnation());
}

TEST_F(WorkerLifecycleTest, APeerLostMidStepEndsTheGenerationAndTheWorkerRegistersAgain) {
  std::unique_ptr<TransportServer> peer_server = *TransportServer::Start(Env::Default(), "127.0.0.1:0");
  const std::string peer = absl::StrCat("127.0.0.1:", peer_server->port());
  coordinator_.Script(World(1, ConfigText(1000, {"runtime.collective_timeout_seconds=20"}), {peer}));
  absl::Status result;
  std::thread worker([&] { result = RunWorker(options_, server_.get()); });

  // Rank 1 joins generation 1 and has its stream to rank 0 open (a frame
  // no step expects), as a peer that started the step would.
  std::unique_ptr<Transport> peer_transport = *peer_server->Connect(1, 1, {options_.transport_address, peer});
  const char byte = 0;
  ASSERT_TRUE(peer_transport->Send(0, /*tag=*/999'999, absl::MakeConstSpan(&byte, 1), absl::Now() + absl::Seconds(10))
                  .ok());
  ASSERT_TRUE(peer_transport->Flush(absl::Now() + absl::Seconds(10)).ok());
  // total_steps is reported once the worker is connected and about to train;
  // its first step then waits for rank 1, which dies.
  ASSERT_TRUE(coordinator_.AwaitReport([](const WorkerReport& r) { return r.total_steps() > 0; },
                                       absl::Seconds(60)));
  absl::SleepFor(absl::Milliseconds(200));
  peer_transport.reset();
  peer_server.reset();
  worker.join();

  EXPECT_TRUE(result.ok()) << result;
  const std::vector<RegisterRequest> regs = coordinator_.registrations();
  ASSERT_EQ(regs.size(), 2u);
  EXPECT_EQ(regs[1].previous_generation(), 1u);
  EXPECT_NE(regs[1].reason().find("rank 1"), std::string::npos) << regs[1].reason();
  for (const WorkerReport& r : coordinator_.reports()) {
    EXPECT_FALSE(r.finished());
    EXPECT_TRUE(r.fatal_error().empty()) << r.fatal_error();
    EXPECT_EQ(r.steps_done(), 0);
  }
}

TEST_F(WorkerLifecycleTest, AWatchdogComplaintReachesTheCoordinatorWhichMovesTheWorldOn) {
  // Rank 1 stays connected but silent: the worker's first step hangs until
  // the watchdog reports it; the coordinator then starts generation 2 (as
  // the real one does for a stuck worker), which frees the worker at once.
  std::unique_ptr<TransportServer> peer_server = *TransportServer::Start(Env::Default(), "127.0.0.1:0");
  const std::string peer = absl::StrCat("127.0.0.1:", peer_server->port());
  coordinator_.Script(World(1, ConfigText(1000, {"runtime.watchdog_timeout_seconds=0.5",
                                                 "runtime.collective_timeout_seconds=120"}),
                            {peer}));
  coordinator_.SetResponder([](const WorkerReport& r) -> std::optional<CoordinatorCommand> {
    if (r.watchdog().empty()) return std::nullopt;
    CoordinatorCommand c;
    c.set_new_generation(2);
    return c;
  });
  absl::Status result;
  std::thread worker([&] { result = RunWorker(options_, server_.get()); });
  std::unique_ptr<Transport> peer_transport = *peer_server->Connect(1, 1, {options_.transport_address, peer});
  worker.join();  // bounded: the watchdog fires after 0.5 s of no progress

  EXPECT_TRUE(result.ok()) << result;
  bool complained = false;
  for (const WorkerReport& r : coordinator_.reports()) {
    if (r.watchdog().empty()) continue;
    complained = true;
    EXPECT_NE(r.watchdog().find("rank 0 made no progress past step 0"), std::string::npos) << r.watchdog();
  }
  EXPECT_TRUE(complained);
  const std::vector<RegisterRequest> regs = coordinator_.registrations();
  ASSERT_EQ(regs.size(), 2u);
  EXPECT_EQ(regs[1].previous_generation(), 1u);
  EXPECT_FALSE(regs[1].reason().empty());
}

TEST_F(WorkerLifecycleTest, AFailureARestartWouldRepeatIsReportedAsFatalAndReturned) {
  // A learning rate this large makes the loss non-finite within a few steps.
  coordinator_.Script(World(1, ConfigText(50, {"schedule.base_lr=1e30", "schedule.warmup_steps=0"})));
  const absl::Status result = RunWorker(options_, server_.get());
  EXPECT_TRUE(absl::IsFailedPrecondition(result)) << result;
  ASSERT_FALSE(coordinator_.reports().empty());
  EXPECT_EQ(coordinator_.reports().back().fatal_error(), std::string(result.message()));
  EXPECT_EQ(coordinator_.registrations().size(), 1u);  // no second try
}

TEST(ClassifyGenerationEndTest, DecidesByStatusCodeAlone) {
  EXPECT_EQ(ClassifyGenerationEnd(absl::OkStatus(), false), GenerationEnd::kFinished);
  EXPECT_EQ(ClassifyGenerationEnd(absl::DataLossError("x"), true), GenerationEnd::kBadCheckpoint);
  EXPECT_EQ(ClassifyGenerationEnd(absl::DataLossError("x"), false), GenerationEnd::kRejoin);
  EXPECT_EQ(ClassifyGenerationEnd(absl::FailedPreconditionError("x"), false), GenerationEnd::kFatal);
  EXPECT_EQ(ClassifyGenerationEnd(absl::InvalidArgumentError("x"), true), GenerationEnd::kFatal);
  for (absl::StatusCode c : {absl::StatusCode::kUnavailable, absl::StatusCode::kDeadlineExceeded,
                             absl::StatusCode::kAborted, absl::StatusCode::kInternal}) {
    EXPECT_EQ(ClassifyGenerationEnd(absl::Status(c, "is over"), false), GenerationEnd::kRejoin);
  }
}

}  // namespace
}  // namespace shardline
