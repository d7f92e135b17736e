// shardline-worker: one rank of a distributed job. See --help.
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <optional>
#include <random>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/process_init.h"
#include "common/args.h"
#include "common/config.h"
#include "common/env.h"
#include "common/logging.h"
#include "common/metrics_exposer.h"
#include "common/status_macros.h"
#include "prometheus/registry.h"
#include "worker/collective/grpc_transport.h"
#include "worker/collective/ring.h"
#include "worker/coordinator_client.h"
#include "worker/data/dataset.h"
#include "worker/model/gemm.h"
#include "worker/train/train_loop.h"
#include "worker/worker_metrics.h"

namespace shardline {
namespace {

constexpr char kHelp[] =
    "usage: shardline-worker --coordinator HOST:PORT [--listen HOST:PORT]\n"
    "                        [--metrics_listen HOST:PORT] [--rank K]\n"
    "\n"
    "One rank of a distributed job. The job config comes from the coordinator;\n"
    "the worker needs no config file (only the data set at the config's data.dir).\n"
    "\n"
    "  --coordinator HOST:PORT    the coordinator's --listen address\n"
    "  --listen HOST:PORT         address other workers connect to (default\n"
    "                             127.0.0.1:0; port 0 picks one)\n"
    "  --advertise HOST           host name peers should use (default: the --listen\n"
    "                             host, or this machine's name for 0.0.0.0)\n"
    "  --metrics_listen HOST:PORT Prometheus /metrics (default 127.0.0.1:0)\n"
    "  --rank K                   ask for rank K (stable across restarts); default any\n"
    "  --connect_timeout_seconds  give up on an unreachable coordinator after this\n"
    "                             long (default 60)\n"
    "\n"
    "Exit codes: 0 the job finished (or was stopped); 1 an error (the message names\n"
    "it); 3 the watchdog found this worker stuck.\n";

// Feeds the Prometheus metrics, and the transport byte counters with them.
class GenerationObserver : public StepObserver {
 public:
  GenerationObserver(WorkerMetrics* metrics, RingCollectives* ring) : metrics_(metrics), ring_(ring) {}
  void OnStart(const RunInfo& info) override { metrics_->OnStart(info); }
  void OnStep(const StepResult& r, double seconds) override {
    if (first_) {  // bench/recovery_bench.sh measures restarts by this line
      SLOG(INFO) << "first step of this generation done (step " << r.step + 1 << ")";
      first_ = false;
    }
    metrics_->OnStep(r, seconds);
    metrics_->SetTransportBytes(ring_->bytes_sent(), ring_->bytes_received());
  }

 private:
  WorkerMetrics* metrics_;
  RingCollectives* ring_;
  bool first_ = true;
};

// Watches one generation's step counter. If it does not move for `timeout`
// it logs what each of the worker's threads is doing and reports to the
// coordinator (which treats the worker as lost); if still stuck after
// another `timeout`, the process exits with code 3 so a supervisor can
// restart it.
class Watchdog {
 public:
  Watchdog(std::atomic<int64_t>* steps, absl::Duration timeout, Heartbeat* heartbeat, int rank)
      : steps_(steps), timeout_(timeout), heartbeat_(heartbeat), rank_(rank),
        thread_([this] { Run(); }) {}
  ~Watchdog() {
    stop_ = true;
    thread_.join();
  }

 private:
  void Run() {
    int64_t last = steps_->load();
    absl::Time moved = absl::Now();
    bool reported = false;
    while (!stop_) {
      absl::SleepFor(absl::Milliseconds(100));
      const int64_t now_steps = steps_->load();
      if (now_steps != last) {
        last = now_steps;
        moved = absl::Now();
        continue;
      }
      const absl::Duration stuck = absl::Now() - moved;
      if (!reported && stuck > timeout_) {
        const std::string what = absl::StrCat("rank ", rank_, " made no progress past step ", last, " for ",
                                              absl::FormatDuration(stuck));
        SLOG(ERROR) << "watchdog: " << what << "; threads: training thread inside step " << last + 1
                    << " (compute or a collective); heartbeat thread: "
                    << (heartbeat_->abandoned().empty() ? "reporting" : heartbeat_->abandoned());
        heartbeat_->ReportStuck(what);
        reported = true;
      }
      if (reported && stuck > 2 * timeout_) {
        SLOG(ERROR) << "watchdog: still stuck; exiting so a supervisor can restart this worker";
        fflush(stderr);
        _exit(3);
      }
    }
  }

  std::atomic<int64_t>* steps_;
  const absl::Duration timeout_;
  Heartbeat* heartbeat_;
  const int rank_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

std::string AdvertiseHost(const Args& args, const std::string& listen) {
  if (args.Has("advertise")) return args.Get("advertise");
  std::string host = listen.substr(0, listen.rfind(':'));
  if (host == "0.0.0.0" || host == "[::]" || host.empty()) {
    char name[256] = {};
    gethostname(name, sizeof(name) - 1);
    host = name;
  }
  return host;
}

absl::Status Run(const Args& args) {
  if (args.Get("coordinator").empty()) return absl::InvalidArgumentError("--coordinator is required");
  int requested_rank = -1;
  if (args.Has("rank") && (!absl::SimpleAtoi(args.Get("rank"), &requested_rank) || requested_rank < 0)) {
    return absl::InvalidArgumentError(absl::StrCat("--rank must be a non-negative integer, got '", args.Get("rank"), "'"));
  }
  double connect_timeout = 60;
  if (args.Has("connect_timeout_seconds") && !absl::SimpleAtod(args.Get("connect_timeout_seconds"), &connect_timeout)) {
    return absl::InvalidArgumentError("--connect_timeout_seconds must be a number");
  }
  const std::string listen = args.Has("listen") ? args.Get("listen") : "127.0.0.1:0";
  ASSIGN_OR_RETURN(std::unique_ptr<TransportServer> server, TransportServer::Start(listen));
  const std::string address = absl::StrCat(AdvertiseHost(args, listen), ":", server->port());

  auto registry = std::make_shared<prometheus::Registry>();
  SetBlasThreads(1);
  const double sgemm_gflops = MeasureSgemmGflops(512, 0.2);
  WorkerMetrics metrics(*registry, sgemm_gflops * 1e9);
  ASSIGN_OR_RETURN(std::unique_ptr<MetricsExposer> exposer,
                   MetricsExposer::Start(args.Has("metrics_listen") ? args.Get("metrics_listen") : "127.0.0.1:0", registry));
  SLOG(INFO) << "worker transport on " << address << ", metrics on port " << exposer->port()
             << ", coordinator " << args.Get("coordinator") << "; OpenBLAS " << BlasCoreName() << " kernels, "
             << static_cast<int>(sgemm_gflops) << " GFLOP/s sgemm";

  CoordinatorClient client(args.Get("coordinator"));
  std::random_device rd;
  const uint64_t incarnation = (static_cast<uint64_t>(rd()) << 32) | rd();
  uint64_t previous_generation = 0;
  std::string left_because;
  std::optional<FashionMnist> data;
  std::string data_dir;

  for (;;) {
    coordinator::RegisterRequest req;
    req.set_transport_address(address);
    req.set_requested_rank(requested_rank);
    req.set_previous_generation(previous_generation);
    req.set_incarnation(incarnation);
    req.set_reason(left_because);
    absl::StatusOr<coordinator::RegisterResponse> world = client.Register(req, absl::Seconds(connect_timeout));
    if (!world.ok()) return world.status();
    if (world->job_over()) {
      SLOG(INFO) << "the job is over" << (world->job_error().empty() ? "" : ": ") << world->job_error()
                 << "; exiting";
      return absl::OkStatus();
    }
    const int rank = world->rank();
    requested_rank = rank;  // keep it across generations
    logging::SetPrefix(absl::StrCat("worker ", rank));
    metrics.SetGeneration(world->generation());
    SLOG(INFO) << "joined generation " << world->generation() << " of job " << world->job_id() << " as rank "
               << rank << " of " << world->world_size();

    // The heartbeat starts at once: the coordinator sees this worker alive
    // while it loads data, and notices at once if it dies meanwhile. The
    // transport is declared first so it outlives the heartbeat's threads.
    absl::Mutex transport_mu;
    std::unique_ptr<Transport> transport;
    Heartbeat heartbeat(&client, rank, world->generation(), world->stop_at(), [&](const std::string&) {
      absl::MutexLock lock(&transport_mu);
      if (transport != nullptr) transport->Shutdown();
    });
    ASSIGN_OR_RETURN(config::JobConfig cfg, ParseConfigText(world->config_text(), "the coordinator's config"));
    RETURN_IF_ERROR(ValidateConfig(cfg));
    RETURN_IF_ERROR(CheckConfigPaths(Env::Default(), cfg));
    SetBlasThreads(cfg.runtime().blas_threads());
    if (!data.has_value() || data_dir != cfg.data().dir()) {
      ASSIGN_OR_RETURN(FashionMnist loaded, LoadFashionMnist(Env::Default(), cfg.data().dir()));
      data = std::move(loaded);
      data_dir = cfg.data().dir();
    }
    std::vector<std::string> peers(world->peers().begin(), world->peers().end());
    {
      ASSIGN_OR_RETURN(std::unique_ptr<Transport> connected, server->Connect(world->generation(), rank, peers));
      absl::MutexLock lock(&transport_mu);
      transport = std::move(connected);
      if (!heartbeat.abandoned().empty()) transport->Shutdown();  // the world moved on while we loaded
    }
    CollectiveOptions copts;
    copts.timeout = absl::Seconds(cfg.runtime().collective_timeout_seconds());
    RingCollectives ring(transport.get(), copts);
    heartbeat.set_total_steps(TotalSteps(cfg, data->train.num_examples));
    GenerationObserver observer(&metrics, &ring);
    TrainOptions options;
    options.metrics = rank == 0 ? &heartbeat : nullptr;
    options.show_progress = rank == 0;
    options.stop_request = heartbeat.stop_request();
    options.checkpoint_request = heartbeat.checkpoint_request();
    options.eval_request = heartbeat.eval_request();
    options.steps_done = heartbeat.steps_done();
    options.observer = &observer;
    options.checkpoint_root = world->checkpoint_root();
    options.checkpoint_sink = &heartbeat;
    options.job_id = world->job_id();
    options.restore_dir = world->restore_dir();
    absl::StatusOr<TrainResult> result;
    {
      Watchdog watchdog(heartbeat.steps_done(), absl::Seconds(cfg.runtime().watchdog_timeout_seconds()),
                        &heartbeat, rank);
      result = RunTraining(cfg, *data, ring, options);
    }
    if (result.ok()) {
      absl::Status delivered = heartbeat.Finish();
      if (!delivered.ok()) SLOG(WARNING) << "finished, but " << delivered.message();
      SLOG(INFO) << "finished " << result->steps << " steps" << (result->stopped_early ? " (stopped early)" : "")
                 << "; final test accuracy " << result->evals.back().accuracy << "; "
                 << result->checkpoint_seconds << " s of training lost to checkpoints; per step: "
                 << PhasesPerStep(result->phase_seconds, result->steps - result->start_step);
      return absl::OkStatus();
    }
    if (absl::IsDataLoss(result.status()) && !world->restore_dir().empty()) {
      // The checkpoint we were told to restore is corrupt here.
      SLOG(ERROR) << "checkpoint at step " << world->start_step() << " failed verification: "
                  << result.status().message();
      heartbeat.ReportBadCheckpoint(world->start_step(), std::string(result.status().message())).IgnoreError();
      previous_generation = world->generation();
      left_because = std::string(result.status().message());
      continue;
    }
    if (absl::IsFailedPrecondition(result.status()) || absl::IsInvalidArgument(result.status())) {
      heartbeat.Finish(std::string(result.status().message())).IgnoreError();
      return result.status();  // a restart would fail the same way
    }
    SLOG(WARNING) << "generation " << world->generation() << " ended: " << result.status().message()
                  << "; registering again";
    previous_generation = world->generation();
    left_because = std::string(result.status().message());
  }
}

}  // namespace
}  // namespace shardline

int main(int argc, char** argv) {
  shardline::InitProcess(argv[0]);
  shardline::logging::SetPrefix("worker");
  shardline::Args args;
  absl::Status parsed = shardline::ParseArgs(
      argc, argv, 1, {"coordinator", "listen", "advertise", "metrics_listen", "rank", "connect_timeout_seconds"}, {},
      "shardline-worker", &args);
  return shardline::RunCommand(parsed, args, shardline::kHelp, "shardline-worker", shardline::Run);
}
