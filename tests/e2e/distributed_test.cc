// The distributed job as users run it: shardline launch, or a coordinator
// and workers started separately with explicit ports; real processes, gRPC
// on loopback, the real data set.
#include <signal.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <atomic>
#include <map>
#include <memory>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "tests/e2e/e2e_util.h"
#include "tests/e2e/subprocess.h"
#include "tests/util/http.h"

namespace shardline {
namespace {

const std::string kConfig = DefaultConfig();


// Port of a worker's /metrics, from its log line "metrics on port N".
int WorkerMetricsPort(const std::string& log) {
  const std::string text = ReadAll(log);
  const size_t at = text.find("metrics on port ");
  if (at == std::string::npos) return -1;
  return std::atoi(text.c_str() + at + 16);
}

std::vector<double> TrainLosses(const std::string& metrics) {
  std::vector<double> out;
  for (const std::string& l : SplitLines(metrics, "train")) out.push_back(JsonField(l, "loss"));
  return out;
}

TEST(DistributedTest, LaunchTrainsWritesMetricsAndKeepsLogs) {
  const std::string dir = FreshDir("dist_launch");
  Subprocess p(LaunchArgv(dir, 2, {"train.total_steps=300", "train.log_every=100", "train.eval_every=150"}));
  ASSERT_EQ(p.Wait(absl::Seconds(120)), 0) << p.Output();
  const std::vector<std::string> train = SplitLines(dir + "/metrics.jsonl", "train");
  const std::vector<std::string> eval = SplitLines(dir + "/metrics.jsonl", "eval");
  ASSERT_EQ(train.size(), 3u);
  ASSERT_EQ(eval.size(), 2u);
  EXPECT_EQ(JsonField(train.back(), "step"), 300);
  EXPECT_EQ(JsonField(eval.back(), "step"), 300);
  EXPECT_GT(JsonField(eval.back(), "accuracy"), 0.75);
  for (const char* log : {"coordinator.log", "worker-0.log", "worker-1.log"}) {
    EXPECT_FALSE(ReadAll(dir + "/logs/" + log).empty()) << log;
  }
  EXPECT_TRUE(absl::StrContains(ReadAll(dir + "/logs/worker-1.log"), "joined generation 1"));
  // The launcher's own output names each process.
  EXPECT_TRUE(absl::StrContains(p.Output(), "[worker 1]")) << p.Output();
  EXPECT_TRUE(absl::StrContains(p.Output(), "[coordinator]"));
}

TEST(DistributedTest, SeparateProcessesWithExplicitPorts) {
  const std::string dir = FreshDir("dist_ports");
  const int coord = FreePort(), coord_metrics = FreePort();
  const std::string coord_addr = absl::StrCat("127.0.0.1:", coord);
  Subprocess c({BinPath("shardline-coordinator"), "--config", kConfig, "--listen", coord_addr, "--workdir", dir,
                "--metrics_listen", absl::StrCat("127.0.0.1:", coord_metrics), "--set", "runtime.num_workers=2",
                "--set", "train.total_steps=100"});
  std::vector<std::unique_ptr<Subprocess>> workers;
  for (int i = 0; i < 2; ++i) {
    workers.push_back(std::make_unique<Subprocess>(std::vector<std::string>{
        BinPath("shardline-worker"), "--coordinator", coord_addr, "--listen",
        absl::StrCat("127.0.0.1:", FreePort()), "--metrics_listen", absl::StrCat("127.0.0.1:", FreePort())}));
  }
  for (auto& w : workers) EXPECT_EQ(w->Wait(absl::Seconds(120)), 0) << w->Output();
  EXPECT_EQ(c.Wait(absl::Seconds(30)), 0) << c.Output();
  EXPECT_TRUE(absl::StrContains(c.Output(), "listening on " + coord_addr)) << c.Output();
  EXPECT_EQ(ReadAll(dir + "/coordinator.address"), coord_addr);
  // Both ranks were handed out without --rank.
  const std::string logs = workers[0]->Output() + workers[1]->Output();
  EXPECT_TRUE(absl::StrContains(logs, "as rank 0 of 2")) << logs;
  EXPECT_TRUE(absl::StrContains(logs, "as rank 1 of 2")) << logs;
  EXPECT_EQ(JsonField(SplitLines(dir + "/metrics.jsonl", "eval").back(), "step"), 100);
}

// /healthz on every process: a worker is not ready until it has joined a
// world; the coordinator is, from the start, until the job fails.
TEST(DistributedTest, HealthzSaysWhenEachProcessIsReady) {
  const std::string dir = FreshDir("dist_healthz");
  const int coord = FreePort(), coord_metrics = FreePort(), w0_metrics = FreePort(), w1_metrics = FreePort();
  const std::string coord_addr = absl::StrCat("127.0.0.1:", coord);
  Subprocess c({BinPath("shardline-coordinator"), "--config", kConfig, "--listen", coord_addr, "--workdir", dir,
                "--metrics_listen", absl::StrCat("127.0.0.1:", coord_metrics), "--set", "runtime.num_workers=2",
                "--set", "train.total_steps=300"});
  auto worker = [&](int metrics_port) {
    return std::make_unique<Subprocess>(std::vector<std::string>{
        BinPath("shardline-worker"), "--coordinator", coord_addr, "--listen", absl::StrCat("127.0.0.1:", FreePort()),
        "--metrics_listen", absl::StrCat("127.0.0.1:", metrics_port)});
  };
  // Polls /healthz on `port` until `code` comes back (bounded); the last answer.
  auto await = [](int port, int code) {
    absl::StatusOr<HttpResponse> r = absl::UnavailableError("not asked yet");
    for (const absl::Time deadline = absl::Now() + absl::Seconds(60); absl::Now() < deadline;) {
      r = HttpFetch(port, "/healthz");
      if (r.ok() && r->code == code) break;
      absl::SleepFor(absl::Milliseconds(50));
    }
    return r;
  };
  std::unique_ptr<Subprocess> w0 = worker(w0_metrics);
  absl::StatusOr<HttpResponse> h = await(w0_metrics, 503);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->code, 503) << h->body;
  EXPECT_TRUE(absl::StrContains(h->body, "no world joined yet")) << h->body;
  h = await(coord_metrics, 200);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->code, 200);
  EXPECT_TRUE(absl::StrContains(h->body, "FORMING")) << h->body;

  std::unique_ptr<Subprocess> w1 = worker(w1_metrics);
  h = await(w0_metrics, 200);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->code, 200) << h->body;
  EXPECT_TRUE(absl::StrContains(h->body, "ok: generation 1")) << h->body;
  EXPECT_EQ(w0->Wait(absl::Seconds(120)), 0) << w0->Output();
  EXPECT_EQ(w1->Wait(absl::Seconds(120)), 0) << w1->Output();
  EXPECT_EQ(c.Wait(absl::Seconds(60)), 0) << c.Output();
}

// A member (it has the job's token) cannot take a rank a live worker holds.
TEST(DistributedTest, SecondWorkerClaimingALiveRankIsRejected) {
  const std::string dir = FreshDir("dist_conflict");
  Subprocess launch(LaunchArgv(dir, 2, {"train.total_steps=1000000"}));
  ASSERT_TRUE(WaitForText(dir + "/logs/coordinator.log", "generation 1 formed", absl::Seconds(60)))
      << launch.Output();
  Subprocess intruder({BinPath("shardline-worker"), "--coordinator", ReadAll(dir + "/coordinator.address"),
                       "--rank", "1", "--connect_timeout_seconds", "2", "--token_file", dir + "/token"});
  EXPECT_EQ(intruder.Wait(absl::Seconds(30)), 1) << intruder.Output();
  EXPECT_TRUE(absl::StrContains(intruder.Output(), "rank 1 is held by a live worker"))
      << intruder.Output();
  launch.Signal(SIGTERM);
  EXPECT_EQ(launch.Wait(absl::Seconds(60)), 0) << launch.Output();
}

TEST(DistributedTest, KilledWorkerIsDetectedRestartedAndTheJobCompletes) {
  const std::string dir = FreshDir("dist_loss");
  Subprocess launch(LaunchArgv(dir, 2, {"train.total_steps=4000", "train.log_every=500"}, /*max_restarts=*/1));
  ASSERT_TRUE(WaitForText(dir + "/logs/worker-1.log", "joined generation 1", absl::Seconds(60))) << launch.Output();
  absl::SleepFor(absl::Milliseconds(500));
  const std::vector<pid_t> victims = LaunchedWorker(dir, 1);
  ASSERT_EQ(victims.size(), 1u);
  const absl::Time killed = absl::Now();
  kill(victims[0], SIGKILL);
  ASSERT_TRUE(WaitForText(dir + "/logs/coordinator.log", "generation 1 broken", absl::Seconds(10)));
  EXPECT_LT(absl::Now() - killed, absl::Seconds(7));  // heartbeat timeout 5 s, usually milliseconds
  ASSERT_EQ(launch.Wait(absl::Seconds(180)), 0) << launch.Output();
  const std::string coordinator = ReadAll(dir + "/logs/coordinator.log");
  EXPECT_TRUE(absl::StrContains(coordinator, "worker rank 1")) << coordinator;
  EXPECT_TRUE(absl::StrContains(coordinator, "generation 2 formed")) << coordinator;
  EXPECT_TRUE(absl::StrContains(ReadAll(dir + "/logs/worker-0.log"), "joined generation 2"));
  const std::vector<std::string> evals = SplitLines(dir + "/metrics.jsonl", "eval");
  ASSERT_FALSE(evals.empty());
  EXPECT_EQ(JsonField(evals.back(), "step"), 4000);
}

// The default job's batch of 128 on 3 and on 5 workers (slices of 42-43 and
// 25-26 examples): the same training as one process, to float reordering,
// and the same world twice is bit for bit.
TEST(DistributedTest, ThreeAndFiveWorkersComputeWhatOneDoesAndAreDeterministic) {
  const std::vector<std::string> sets = {"train.total_steps=50", "train.log_every=1"};
  const std::string one = FreshDir("dist_equiv_1");
  Subprocess single(TrainArgv(one, sets));
  ASSERT_EQ(single.Wait(absl::Seconds(120)), 0) << single.Output();
  const std::vector<double> reference = TrainLosses(one + "/metrics.jsonl");
  ASSERT_EQ(reference.size(), 50u);
  std::map<std::string, std::vector<double>> runs;
  for (const auto& [name, workers] : std::vector<std::pair<std::string, int>>{
           {"dist_equiv_3a", 3}, {"dist_equiv_3b", 3}, {"dist_equiv_5", 5}}) {
    const std::string dir = FreshDir(name);
    Subprocess p(LaunchArgv(dir, workers, sets));
    ASSERT_EQ(p.Wait(absl::Seconds(180)), 0) << p.Output();
    runs[name] = TrainLosses(dir + "/metrics.jsonl");
    ASSERT_EQ(runs[name].size(), 50u) << name;
    for (size_t i = 0; i < reference.size(); ++i) {
      EXPECT_NEAR(runs[name][i], reference[i], 1e-4 * std::max(1.0, std::fabs(reference[i])))
          << name << " step " << i + 1;
    }
  }
  EXPECT_EQ(runs["dist_equiv_3a"], runs["dist_equiv_3b"]);  // bitwise: losses are written with float precision
}

TEST(DistributedTest, MetricsMoveAndSigtermStopsEveryWorkerAtTheSameStep) {
  const std::string dir = FreshDir("dist_metrics");
  Subprocess launch(LaunchArgv(dir, 2, {"train.total_steps=1000000", "train.log_every=50"}));
  ASSERT_TRUE(WaitForText(dir + "/logs/worker-0.log", "joined generation 1", absl::Seconds(60))) << launch.Output();
  int coord_port = 0;
  const std::string coord_metrics = ReadAll(dir + "/coordinator.metrics_address");
  ASSERT_TRUE(absl::SimpleAtoi(coord_metrics.substr(coord_metrics.rfind(':') + 1), &coord_port));
  const int worker_port = WorkerMetricsPort(dir + "/logs/worker-0.log");
  ASSERT_GT(worker_port, 0);
  absl::SleepFor(absl::Milliseconds(800));
  const std::string c1 = *HttpGet(coord_port, "/metrics"), w1 = *HttpGet(worker_port, "/metrics");
  absl::SleepFor(absl::Milliseconds(1200));
  const std::string c2 = *HttpGet(coord_port, "/metrics"), w2 = *HttpGet(worker_port, "/metrics");

  EXPECT_EQ(PromValue(c2, "shardline_generation"), 1);
  EXPECT_EQ(PromValue(c2, "shardline_workers_alive"), 2);
  EXPECT_EQ(PromValue(c2, "shardline_workers_registered"), 2);
  EXPECT_EQ(PromValue(c2, "shardline_worker_losses_total"), 0);
  EXPECT_GT(PromValue(c2, "shardline_global_step"), PromValue(c1, "shardline_global_step"));
  EXPECT_TRUE(absl::StrContains(c2, "shardline_job_state{state=\"running\"} 1")) << c2;
  EXPECT_GT(PromValue(w2, "shardline_step"), PromValue(w1, "shardline_step"));
  EXPECT_GT(PromValue(w2, "shardline_transport_sent_bytes_total"), PromValue(w1, "shardline_transport_sent_bytes_total"));
  EXPECT_GT(PromValue(w2, "shardline_transport_received_bytes_total"), 0);
  EXPECT_GT(PromValue(w2, "shardline_loss"), 0);
  EXPECT_GT(PromValue(w2, "shardline_learning_rate"), 0);
  EXPECT_GT(PromValue(w2, "shardline_samples_per_second"), 0);
  EXPECT_GT(PromValue(w2, "shardline_mfu_ratio"), 0);
  EXPECT_GT(PromValue(w2, "shardline_step_duration_seconds_count"), PromValue(w1, "shardline_step_duration_seconds_count"));
  // ZeRO: each of 2 workers owns half the parameters and their momentum.
  const double owned = PromValue(w2, "shardline_owned_parameter_bytes");
  EXPECT_NEAR(owned, 4.0 * 235146 / 2, 4);
  EXPECT_EQ(PromValue(w2, "shardline_owned_optimizer_state_bytes"), owned);
  EXPECT_TRUE(absl::StrContains(w2, "shardline_phase_seconds_total{phase=\"reduce_scatter\"}")) << w2;
  // What the worker holds: at ZeRO stage 2 every parameter and gradient
  // (resident, to the page), its optimizer state, activations.
  auto held = [&w2](const char* kind) {
    return PromValue(w2, absl::StrCat("shardline_worker_memory_bytes{kind=\"", kind, "\"}"));
  };
  EXPECT_NEAR(held("parameters"), 4.0 * 235146, 4096);
  EXPECT_NEAR(held("gradients"), 4.0 * 235146, 4096);
  EXPECT_EQ(held("parameters_peak"), 4.0 * 235146);
  EXPECT_EQ(held("optimizer"), owned);
  EXPECT_GT(held("activations"), 0);
  EXPECT_GT(held("peak_rss"), held("parameters") + held("gradients") + held("optimizer"));

  launch.Signal(SIGTERM);
  EXPECT_EQ(launch.Wait(absl::Seconds(60)), 0) << launch.Output();
  std::vector<int64_t> stopped;
  for (const char* log : {"worker-0.log", "worker-1.log"}) {
    const std::string text = ReadAll(dir + "/logs/" + log);
    const size_t at = text.find("finished ");
    ASSERT_NE(at, std::string::npos) << text;
    stopped.push_back(std::atoll(text.c_str() + at + 9));
    EXPECT_TRUE(absl::StrContains(text, "(stopped early)")) << text;
  }
  EXPECT_EQ(stopped[0], stopped[1]);
  EXPECT_GT(stopped[0], 0);
  EXPECT_EQ(JsonField(SplitLines(dir + "/metrics.jsonl", "eval").back(), "step"), stopped[0]);
}


// README's first command: the default job on 2 workers reaches 0.89.
TEST(DistributedTest, DefaultJobOnTwoWorkersReachesPublishedAccuracy) {
  const std::string dir = FreshDir("dist_default");
  Subprocess p(LaunchArgv(dir, 2, {}));
  ASSERT_EQ(p.Wait(absl::Seconds(400)), 0) << p.Output();
  const std::string last = SplitLines(dir + "/metrics.jsonl", "eval").back();
  EXPECT_EQ(JsonField(last, "step"), 15 * 468);
  EXPECT_GE(JsonField(last, "accuracy"), 0.89) << last;
}


// A worker whose step stops advancing (here: its peer is frozen, and the
// collective deadline is long) logs what its threads are doing and reports
// itself stuck; the coordinator treats it as lost.
TEST(DistributedTest, WatchdogReportsAStuckWorker) {
  const std::string dir = FreshDir("dist_watchdog");
  Subprocess launch(LaunchArgv(dir, 2, {"train.total_steps=1000000", "runtime.watchdog_timeout_seconds=1",
                                        "runtime.collective_timeout_seconds=60"}));
  ASSERT_TRUE(WaitForText(dir + "/logs/worker-0.log", "first step of this generation", absl::Seconds(60)))
      << launch.Output();
  const std::vector<pid_t> peer = LaunchedWorker(dir, 1);
  ASSERT_EQ(peer.size(), 1u);
  kill(peer[0], SIGSTOP);
  EXPECT_TRUE(WaitForText(dir + "/logs/worker-0.log", "watchdog: rank 0 made no progress past step",
                          absl::Seconds(20)));
  EXPECT_TRUE(WaitForText(dir + "/logs/worker-0.log", "training thread inside step", absl::Seconds(1)));
  EXPECT_TRUE(WaitForText(dir + "/logs/coordinator.log", "watchdog fired", absl::Seconds(10)))
      << ReadAll(dir + "/logs/coordinator.log");
  kill(peer[0], SIGKILL);
  launch.Signal(SIGTERM);
  launch.Wait(absl::Seconds(60));
}


TEST(DistributedTest, Sigusr1MakesEveryWorkerEvaluateAtTheSameStep) {
  const std::string dir = FreshDir("dist_eval_now");
  Subprocess launch(LaunchArgv(dir, 2, {"train.total_steps=1000000", "train.eval_every=0"}));
  ASSERT_TRUE(WaitForText(dir + "/logs/worker-0.log", "first step of this generation", absl::Seconds(60)))
      << launch.Output();
  ASSERT_TRUE(SignalLaunchedCoordinator(dir, SIGUSR1));
  ASSERT_TRUE(WaitForText(dir + "/metrics.jsonl", "\"split\":\"eval\"", absl::Seconds(20))) << launch.Output();
  EXPECT_TRUE(absl::StrContains(ReadAll(dir + "/logs/coordinator.log"), "eval requested: every worker evaluates"));
  const std::vector<std::string> evals = SplitLines(dir + "/metrics.jsonl", "eval");
  ASSERT_EQ(evals.size(), 1u);
  EXPECT_GT(JsonField(evals[0], "step"), 0);
  EXPECT_GT(JsonField(evals[0], "accuracy"), 0.0);
  EXPECT_LE(JsonField(evals[0], "accuracy"), 1.0);
  launch.Signal(SIGTERM);
  EXPECT_EQ(launch.Wait(absl::Seconds(60)), 0) << launch.Output();
}

TEST(DistributedTest, Sigusr2MakesEveryWorkerSaveACheckpointThatIsCommitted) {
  const std::string dir = FreshDir("dist_checkpoint_now");
  // No checkpoint schedule at all: the only save is the one asked for.
  Subprocess launch(LaunchArgv(dir, 2, {"train.total_steps=1000000", "checkpoint.every_steps=0",
                                        "checkpoint.save_final=false"}));
  ASSERT_TRUE(WaitForText(dir + "/logs/worker-0.log", "first step of this generation", absl::Seconds(60)))
      << launch.Output();
  ASSERT_TRUE(SignalLaunchedCoordinator(dir, SIGUSR2));
  const std::string log = dir + "/logs/coordinator.log";
  const std::string asked = "checkpoint requested: every worker saves after step ";
  ASSERT_TRUE(WaitForText(log, asked, absl::Seconds(30))) << launch.Output();
  const std::string text = ReadAll(log);
  const int64_t step = std::atoll(text.c_str() + text.find(asked) + asked.size());
  EXPECT_GT(step, 0);
  // The workers save together at that step, or at the first step they all
  // know of it if the coordinator's view of the steps lagged (heartbeats
  // come every 100 ms).
  ASSERT_TRUE(WaitForText(log, " shards)", absl::Seconds(30))) << ReadAll(log);
  const std::string after = ReadAll(log);
  const std::string committed = "committed checkpoint at step ";
  const size_t at = after.find(committed, after.find(asked));
  ASSERT_NE(at, std::string::npos) << after;
  EXPECT_GE(std::atoll(after.c_str() + at + committed.size()), step) << after;
  EXPECT_TRUE(absl::StrContains(after.substr(at), "(2 shards)")) << after;
  launch.Signal(SIGTERM);
  EXPECT_EQ(launch.Wait(absl::Seconds(60)), 0) << launch.Output();
}

}  // namespace
}  // namespace shardline

namespace shardline {
namespace {

// A rank slowed down - stopped and continued so it runs a fifth of the time
// (a margin for a loaded machine, where every rank is slow) - is scored as a
// straggler by the coordinator, logged, exported,
// and forgiven once it runs freely again. The other rank waits for it but is
// not blamed.
TEST(DistributedTest, ASlowedRankIsScoredAndLoggedAsAStragglerAndForgivenAfter) {
  const std::string dir = FreshDir("dist_straggler");
  Subprocess launch(LaunchArgv(dir, 2, {"train.total_steps=100000000"}));
  const std::string coord_log = dir + "/logs/coordinator.log";
  ASSERT_TRUE(WaitForText(dir + "/logs/worker-1.log", "joined generation 1", absl::Seconds(60))) << launch.Output();
  const std::vector<pid_t> slow_pid = LaunchedWorker(dir, 1);
  ASSERT_EQ(slow_pid.size(), 1u);
  std::atomic<bool> slow{true};
  std::thread throttle([&] {
    for (const absl::Time end = absl::Now() + absl::Seconds(150); slow.load() && absl::Now() < end;) {
      kill(slow_pid[0], SIGSTOP);
      absl::SleepFor(absl::Milliseconds(40));
      kill(slow_pid[0], SIGCONT);
      absl::SleepFor(absl::Milliseconds(10));
    }
    kill(slow_pid[0], SIGCONT);
  });
  const bool flagged = WaitForText(coord_log, "rank 1 (127.0.0.1:", absl::Seconds(120)) &&
                       WaitForText(coord_log, "is a straggler", absl::Seconds(5));
  int coord_port = 0;
  const std::string address = ReadAll(dir + "/coordinator.metrics_address");
  ASSERT_TRUE(absl::SimpleAtoi(address.substr(address.rfind(':') + 1), &coord_port));
  const absl::StatusOr<std::string> page = HttpGet(coord_port, "/metrics");
  slow = false;
  throttle.join();
  ASSERT_TRUE(flagged) << ReadAll(coord_log);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_LT(PromValue(*page, "shardline_straggler_score{rank=\"1\"}"), 0.7) << *page;
  EXPECT_EQ(PromValue(*page, "shardline_straggler_score{rank=\"0\"}"), 1.0) << *page;
  for (absl::string_view line : absl::StrSplit(ReadAll(coord_log), '\n')) {
    EXPECT_FALSE(absl::StrContains(line, "straggler") && absl::StrContains(line, "rank 0 (")) << "blamed: " << line;
  }
  EXPECT_TRUE(WaitForText(coord_log, "is no longer a straggler", absl::Seconds(30))) << ReadAll(coord_log);
  kill(launch.pid(), SIGTERM);
  EXPECT_EQ(launch.Wait(absl::Seconds(60)), 0) << launch.Output();
}

}  // namespace
}  // namespace shardline
