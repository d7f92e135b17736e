// shardline-coordinator: owns one job. See --help.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/checkpoint/checkpoint_dir.h"
#include "common/platform/process_init.h"
#include "common/faults/slow_disk_env.h"
#include "common/job/config.h"
#include "common/net/listen_address.h"
#include "common/platform/env.h"
#include "common/net/grpc_util.h"
#include "common/platform/logging.h"
#include "common/observability/metrics_exposer.h"
#include "common/observability/tensorboard_writer.h"
#include "common/platform/status_macros.h"
#include "coordinator/coordinator_metrics.h"
#include "coordinator/goodput.h"
#include "coordinator/metrics_history.h"
#include "coordinator/status_page.h"
#include "coordinator/trace_log.h"
#include "coordinator/status_views.h"
#include "common/status/progress_line.h"
#include "coordinator/decide/report_check.h"
#include "coordinator/service.h"
#include "prometheus/registry.h"
#include "common/platform/args.h"
#include "common/faults/fault_injection.h"
#include "common/net/rpc_auth.h"
#include "common/net/rpc_auth_metrics.h"
#include "common/platform/workdir_lock.h"
#include "common/platform/clock.h"

namespace shardline {
namespace {

// How long a coordinator that finds its job already finished keeps
// answering returning workers (whose Register retries come within 1 s).
constexpr absl::Duration kFinishedLinger = absl::Seconds(3);

constexpr char kHelp[] =
    "usage: shardline-coordinator --config FILE --listen HOST:PORT --workdir DIR\n"
    "                             [--metrics_listen HOST:PORT] [--set a.b=value ...]\n"
    "\n"
    "Owns one training job: sends the config to every worker, forms the world\n"
    "of runtime.num_workers ranks, detects lost workers and restarts the world,\n"
    "writes DIR/metrics.jsonl, and keeps its durable state in DIR/coordinator_db.\n"
    "\n"
    "  --config FILE             job config (text proto); --set overrides fields\n"
    "  --listen HOST:PORT        the workers' address for it; port 0 picks one\n"
    "                            (written to DIR/coordinator.address)\n"
    "  --workdir DIR             metrics.jsonl (and .csv), tensorboard/, traces/,\n"
    "                            config.textproto, coordinator_db/\n"
    "  --metrics_listen H:P      Prometheus /metrics, /healthz and the live status page\n"
    "                            /status (default 127.0.0.1:0; the port is written to\n"
    "                            DIR/coordinator.metrics_address)\n"
    "  --heartbeat_timeout_ms T  a worker silent this long is lost (default 5000)\n"
    "  --progress_every_seconds S  log a progress line this often (default 1; 0: never;\n"
    "                            the Status RPC always answers)\n"
    "  --straggler_threshold X   log a rank whose straggler score stays below X\n"
    "                            (0..1, default 0.7) for 10 s\n"
    "  --rpc_threads K           threads serving the workers' RPCs (1..64, default 1;\n"
    "                            each reads about 5,000 workers' reports per core)\n"
    "  --token_file FILE         the job token (a private file); default $SHARDLINE_TOKEN.\n"
    "                            With a token, every call must carry it\n"
    "  --tls_cert F --tls_key F --tls_ca F  mutual TLS (PEM): this process's\n"
    "                            certificate and key, and the CA every peer's must chain to\n"
    "  --insecure                allow --listen beyond loopback without a token or TLS\n"
    "  --stop_requested          a graceful stop was asked for before this start (launch\n"
    "                            restarting a coordinator lost in one): the first world\n"
    "                            stops after one step and saves\n"
    "\n"
    "SIGTERM or SIGINT: every worker stops at a step ahead of all of them, then\n"
    "all exit 0. Another signal more than a second later exits at once (signals\n"
    "within a second are one request: schedulers signal wrappers and children).\n"
    "SIGUSR1: every worker evaluates\n"
    "at a step ahead of all of them (an eval line in metrics.jsonl).\n"
    "SIGUSR2: every worker saves a checkpoint at a step ahead of all of them,\n"
    "committed like any other (before maintenance, say).\n";

std::atomic<int> g_signals{0};
std::atomic<int> g_eval_requests{0};
std::atomic<int> g_checkpoint_requests{0};

void OnSignal(int) { g_signals.fetch_add(1); }
void OnEvalSignal(int) { g_eval_requests.fetch_add(1); }
void OnCheckpointSignal(int) { g_checkpoint_requests.fetch_add(1); }

void InstallStopHandler() {
  struct sigaction sa = {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  sa.sa_handler = OnEvalSignal;
  sigaction(SIGUSR1, &sa, nullptr);
  sa.sa_handler = OnCheckpointSignal;
  sigaction(SIGUSR2, &sa, nullptr);
}

// The coordinator's flags, checked.
struct CoordinatorFlags {
  std::string config;
  std::string listen;
  std::string workdir;
  std::string metrics_listen = "127.0.0.1:0";
  absl::Duration heartbeat_timeout = absl::Seconds(5);
  StatusViewsOptions views;
  int rpc_threads = 1;
  bool stop_requested = false;
};

absl::StatusOr<CoordinatorFlags> ParseFlags(const Args& args) {
  for (const char* f : {"config", "listen", "workdir"}) {
    if (args.Get(f).empty()) return absl::InvalidArgumentError(absl::StrCat("--", f, " is required"));
  }
  CoordinatorFlags f;
  f.config = args.Get("config");
  f.listen = args.Get("listen");
  f.workdir = args.Get("workdir");
  if (args.Has("metrics_listen")) f.metrics_listen = args.Get("metrics_listen");
  f.stop_requested = args.Has("stop_requested");
  int64_t timeout_ms = 5000;
  if (args.Has("heartbeat_timeout_ms") && !absl::SimpleAtoi(args.Get("heartbeat_timeout_ms"), &timeout_ms)) {
    return absl::InvalidArgumentError("--heartbeat_timeout_ms must be an integer");
  }
  f.heartbeat_timeout = absl::Milliseconds(timeout_ms);
  double& progress_every = f.views.progress_every_seconds;
  if (args.Has("progress_every_seconds") &&
      (!absl::SimpleAtod(args.Get("progress_every_seconds"), &progress_every) || progress_every < 0)) {
    return absl::InvalidArgumentError("--progress_every_seconds must be a non-negative number");
  }
  double& threshold = f.views.stragglers.threshold;
  if (args.Has("straggler_threshold") &&
      (!absl::SimpleAtod(args.Get("straggler_threshold"), &threshold) || threshold <= 0 || threshold > 1)) {
    return absl::InvalidArgumentError("--straggler_threshold must be a number in (0, 1]");
  }
  ASSIGN_OR_RETURN(const int64_t rpc_threads, IntFlag(args, "rpc_threads", 1));
  if (rpc_threads < 1 || rpc_threads > 64) {
    return absl::InvalidArgumentError(absl::StrCat("--rpc_threads: ", rpc_threads, " is not between 1 and 64"));
  }
  f.rpc_threads = static_cast<int>(rpc_threads);
  return f;
}

// Where the job's metric records go: metrics.jsonl, metrics.csv,
// TensorBoard, and the status page's curves (loaded with the run so far, so
// a restarted coordinator shows the whole run).
struct Records {
  MetricsHistory history;
  std::unique_ptr<MetricsWriter> jsonl;
  std::unique_ptr<CsvMetricsWriter> csv;
  std::unique_ptr<TensorBoardWriter> tensorboard;
  std::unique_ptr<MetricsTee> tee;
};

absl::StatusOr<std::unique_ptr<Records>> OpenRecords(Env* env, const std::string& workdir) {
  auto r = std::make_unique<Records>();
  if (absl::Status loaded = r->history.Load(env, workdir + "/metrics.jsonl"); !loaded.ok()) {
    SLOG(WARNING) << "the status page's curves start empty: " << loaded;  // a view; the file stays as it is
  }
  ASSIGN_OR_RETURN(r->jsonl, MetricsWriter::Open(env, workdir + "/metrics.jsonl"));
  ASSIGN_OR_RETURN(r->csv, CsvMetricsWriter::Open(env, workdir + "/metrics.csv"));
  ASSIGN_OR_RETURN(r->tensorboard, TensorBoardWriter::Open(env, workdir + "/tensorboard"));
  r->tee = std::make_unique<MetricsTee>(
      std::vector<MetricsSink*>{r->jsonl.get(), r->csv.get(), r->tensorboard.get(), &r->history});
  return r;
}

// /healthz: healthy unless the job failed.
Health HealthOf(Job& job) {
  const coordinator::JobStatus s = job.Snapshot();
  return Health{s.state() != coordinator::JobStatus::FAILED,
                absl::StrCat("job ", s.job_id(), " ", coordinator::JobStatus::State_Name(s.state()), ", generation ",
                             s.generation(), ", step ", s.global_step())};
}

const char* SecurityNote(const RpcAuth& auth, const std::string& listen) {
  return auth.enabled()               ? "; every call must carry the job token"
         : auth.tls()                 ? "; mutual TLS, no job token"
         : IsLoopbackListen(listen)   ? "; no job token (loopback only)"
                                      : "; no job token and no TLS: INSECURE, reachable beyond this host";
}

// Signals, heartbeat deadlines and the views until the job ends. This loop
// wakes every 10 ms for signals and heartbeat deadlines (so a stop or "eval
// now" is decided, and a silent worker found, within about 10 ms), and every
// 100 ms for the status, metrics and progress work. A gap of a second means
// the process did not run (SIGSTOP, a stalled host) and could not read
// reports meanwhile. Fails only on a second signal.
absl::Status Serve(Job& job, StatusViews& views) {
  constexpr absl::Duration kStalled = absl::Seconds(1);
  constexpr absl::Duration kStatusEvery = absl::Milliseconds(100);
  int signals_seen = 0, evals_seen = 0, checkpoints_seen = 0;
  // Durations (a stall, the signal window, the status period) on the
  // monotonic clock: a wall-clock step is not a stall.
  Env* const env = job.env();
  absl::Time last_tick = MonotonicNow(env);
  absl::Time last_status = absl::InfinitePast();
  absl::Time first_signal = absl::InfinitePast();
  while (!job.AwaitEnd(absl::Milliseconds(10))) {
    const absl::Time tick = MonotonicNow(env);
    if (tick - last_tick > kStalled) job.RestartHeartbeatDeadlines(tick - last_tick);
    last_tick = tick;
    // Schedulers often signal a wrapper and its children at once (Slurm's
    // scancel, a shell that forwards SIGTERM): signals within a second of
    // the first are the same request. A later one means "exit now".
    if (const int signals = g_signals.load(); signals > signals_seen) {
      if (signals_seen == 0) {
        first_signal = tick;
        job.RequestStop("signal received");
      } else if (tick - first_signal > absl::Seconds(1)) {
        return absl::AbortedError("second signal: exiting without waiting for the workers");
      }
      signals_seen = signals;
    }
    if (g_eval_requests.load() > evals_seen) {
      evals_seen = g_eval_requests.load();
      job.RequestEval();
    }
    if (g_checkpoint_requests.load() > checkpoints_seen) {
      checkpoints_seen = g_checkpoint_requests.load();
      if (absl::Status asked = job.RequestCheckpoint(); !asked.ok()) SLOG(WARNING) << asked.message();
    }
    job.CheckHeartbeats();
    if (tick - last_status < kStatusEvery) continue;
    last_status = tick;
    job.MaybeRequestCheckpoint();
    views.Tick(WallNow(env));
  }
  return absl::OkStatus();
}

// /metrics, /healthz and the live status page, which shows no secrets (the
// token never leaves the RPC layer), like /metrics beside it.
absl::StatusOr<std::unique_ptr<MetricsExposer>> StartExposer(Env* env, const std::string& listen,
                                                             std::shared_ptr<prometheus::Registry> registry, Job& job,
                                                             StatusViews& views, MetricsHistory& history) {
  if (const std::string warning = MetricsListenWarning(listen); !warning.empty()) SLOG(WARNING) << warning;
  ASSIGN_OR_RETURN(std::unique_ptr<MetricsExposer> exposer,
                   MetricsExposer::Start(env, listen, std::move(registry), [&job] { return HealthOf(job); }));
  exposer->AddPage("/status", "text/html; charset=utf-8", [env, &views, &history] {
    return StatusPageHtml(views.Status(), history.Train(), history.Eval(), WallNow(env));
  });
  return exposer;
}

// One owner per workdir, taken before anything in it changes (the lock of
// the `launch` that started us, if it did); the checkpoint directory checked
// (the workers write their shards there and the coordinator commits them:
// found now, not at the first save after minutes of training), and the
// config the job runs with written beside them.
absl::StatusOr<std::unique_ptr<WorkdirLock>> TakeWorkdir(Env* env, const std::string& workdir,
                                                         const config::JobConfig& cfg) {
  ASSIGN_OR_RETURN(std::unique_ptr<WorkdirLock> lock, WorkdirLock::Acquire(env, workdir, "shardline-coordinator"));
  RETURN_IF_ERROR(Annotate(env->CreateDirs(workdir), "creating --workdir"));
  RETURN_IF_ERROR(CheckWritableDir(env, CheckpointRoot(workdir)));
  RETURN_IF_ERROR(WriteFileAtomically(env, workdir + "/config.textproto", ConfigToText(cfg)));
  return lock;
}

// The orderly end: the workers hear the job's end on their streams, and
// their last reports and stream ends go through (bounded: 2 s in all); every
// record and commit decided so far is on disk before the server stops.
void EndServing(Job& job, CoordinatorService& service, GrpcServer& server) {
  Env* const env = job.env();
  const absl::Time drain_by = MonotonicNow(env) + absl::Seconds(2);
  while (service.open_streams() > 0 && MonotonicNow(env) < drain_by) env->SleepForMicros(10'000);
  job.FlushDisk();
  server.Shutdown(DeadlineIn(std::max(drain_by - MonotonicNow(env), absl::ZeroDuration()), env));
  service.Stop();
}

// The job's credential (--token_file or $SHARDLINE_TOKEN; none: an open
// job), refused if it is a reader's or a rank's (issue 62: a reader's was
// accepted here).
absl::StatusOr<std::unique_ptr<RpcAuth>> LoadJobAuth(Env* env, const Args& args, const std::string& listen,
                                                     prometheus::Registry& registry) {
  ASSIGN_OR_RETURN(std::unique_ptr<RpcAuth> auth, LoadRpcAuth(env, args, listen, RejectedRpcCounter(registry)));
  if (auth->enabled()) {
    RETURN_IF_ERROR(RequireJobToken(auth->credential(),
                                    args.Has("token_file") ? absl::StrCat("--token_file ", args.Get("token_file"))
                                                           : std::string("$SHARDLINE_TOKEN"),
                                    "the coordinator"));
  }
  return auth;
}

CoordinatorOptions CoordinatorOptionsFor(Env* env, const config::JobConfig& cfg, const CoordinatorFlags& flags,
                                         const RpcAuth& auth) {
  CoordinatorOptions options;
  options.env = env;
  options.world_size = cfg.runtime().num_workers();
  options.checkpoint_root = CheckpointRoot(flags.workdir);
  options.trace_dir = flags.workdir + "/traces";
  options.token = auth.token();
  options.stop_requested = flags.stop_requested;
  options.disk_thread = true;  // no RPC thread ever waits on the disk
  options.heartbeat_timeout = flags.heartbeat_timeout;
  return options;
}

// The control server's options: registrations and reports are bounded
// field by field, and the receive limit is the largest those bounds allow
// (coordinator/decide/report_check.h). Plain TCP goes through the connection gate
// (grpc_util.h); TLS cannot.
GrpcServerOptions ControlServerOptions(Env* env, const RpcAuth& auth, prometheus::Registry& registry) {
  GrpcServerOptions server_options;
  server_options.env = env;
  server_options.int_args = ControlServerArguments();
  server_options.max_receive_bytes = kMaxControlMessageBytes;
  server_options.gate.on_refused = RefusedConnectionCounter(registry);
  if (auth.tls()) server_options.credentials = auth.ServerCredentials();
  return server_options;
}

absl::Status Run(const Args& args) {
  Env* env = DefaultEnvWithFaults();  // SHARDLINE_SLOW_DISK_FILE: fault-injection runs only
  ASSIGN_OR_RETURN(const CoordinatorFlags flags, ParseFlags(args));
  ASSIGN_OR_RETURN(config::JobConfig cfg, LoadConfig(env, flags.config, args.GetAll("set"), /*check_paths=*/false));
  const std::string& workdir = flags.workdir;
  auto registry = std::make_shared<prometheus::Registry>();
  ASSIGN_OR_RETURN(std::unique_ptr<RpcAuth> auth, LoadJobAuth(env, args, flags.listen, *registry));
  ASSIGN_OR_RETURN(const std::unique_ptr<WorkdirLock> lock, TakeWorkdir(env, workdir, cfg));
  ASSIGN_OR_RETURN(std::unique_ptr<JobStore> store, JobStore::Open(env, workdir + "/coordinator_db"));
  ASSIGN_OR_RETURN(std::unique_ptr<Records> records, OpenRecords(env, workdir));

  const CoordinatorOptions options = CoordinatorOptionsFor(env, cfg, flags, *auth);
  Job job(cfg, store.get(), records->tee.get(), options);
  RETURN_IF_ERROR(job.Init());
  // A coordinator restarted after every worker finished (killed at the very
  // end, or its supervisor restarting it) has no workers to wait for. It
  // answers any that come back to register "the job is over" for
  // kFinishedLinger, then exits 0.
  const int64_t finished_at = job.FinishedAtStart();
  if (finished_at > 0) {
    SLOG(INFO) << "job " << job.job_id() << " already finished at step " << finished_at
               << " with this config; nothing to run. Answering returning workers for "
               << absl::FormatDuration(kFinishedLinger) << ", then exiting";
  }
  ASSIGN_OR_RETURN(std::unique_ptr<GoodputLedger> goodput, GoodputLedger::Load(store.get(), WallNow(env)));
  // With train.trace_steps, the coordinator's track and the ranks' clock
  // offsets go beside the workers' traces.
  std::unique_ptr<TraceLog> trace;
  if (cfg.train().trace_steps_size() > 0) {
    ASSIGN_OR_RETURN(trace, TraceLog::Open(env, options.trace_dir));
  }
  CoordinatorMetrics metrics(*registry);
  StatusViews views(&job, goodput.get(), &metrics, std::move(trace), flags.views);
  metrics.Update(views.Status());  // a restarted coordinator's counters continue from the persisted totals
  ASSIGN_OR_RETURN(std::unique_ptr<MetricsExposer> exposer,
                   StartExposer(env, flags.metrics_listen, registry, job, views, records->history));
  CoordinatorServiceOptions service_options;
  service_options.queues.threads = flags.rpc_threads;
  CoordinatorService service(&job, auth.get(), [&views] { return views.Status(); }, service_options);
  ASSIGN_OR_RETURN(GrpcServer server, service.Listen(flags.listen, ControlServerOptions(env, *auth, *registry)));
  // However Run returns, calls get at most 2 s to end (a server shut down
  // without a deadline would wait for every worker's stream), then the
  // service's threads stop. Both are no-ops after the orderly end below.
  auto stop_serving = absl::MakeCleanup([env, &server, &service] {
    server.Shutdown(DeadlineIn(absl::Seconds(2), env));
    service.Stop();
  });
  const std::string address = absl::StrCat(ListenHost(flags.listen), ":", server.port);
  RETURN_IF_ERROR(WriteFileAtomically(env, workdir + "/coordinator.address", address));
  RETURN_IF_ERROR(WriteFileAtomically(env, workdir + "/coordinator.metrics_address",
                                      absl::StrCat("127.0.0.1:", exposer->port())));
  SLOG(INFO) << "coordinator of job " << job.job_id() << " listening on " << address << ", metrics on port "
             << exposer->port() << ", waiting for " << options.world_size << " workers"
             << SecurityNote(*auth, flags.listen);

  RETURN_IF_ERROR(Serve(job, views));
  if (finished_at > 0) env->SleepForMicros(absl::ToInt64Microseconds(kFinishedLinger));
  if (job.final_status().ok()) HangPoint("coordinator_after_job_end");
  views.Final(WallNow(env));
  EndServing(job, service, server);
  RETURN_IF_ERROR(job.final_status());
  SLOG(INFO) << "job finished";
  return absl::OkStatus();
}

}  // namespace
}  // namespace shardline

int main(int argc, char** argv) {
  shardline::InitProcess(argv[0]);
  shardline::InstallStopHandler();  // after the failure handler, which also takes SIGTERM
  shardline::logging::SetPrefix("coordinator");
  shardline::Args args;
  absl::Status parsed = shardline::ParseArgs(
      argc, argv, 1, {{"config", "listen", "workdir", "metrics_listen", "heartbeat_timeout_ms", "progress_every_seconds", "straggler_threshold", "rpc_threads",
                           "token_file", "tls_cert", "tls_key", "tls_ca"}, {"set"}, {"insecure", "stop_requested"}}, "shardline-coordinator", &args);
  return shardline::RunCommand(parsed, args, shardline::kHelp, "shardline-coordinator", shardline::Run);
}
