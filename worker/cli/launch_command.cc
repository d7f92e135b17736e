// shardline launch: a coordinator and N workers as child processes on this
// host, with their output prefixed and kept in <workdir>/logs/, dead workers
// restarted (up to --max_restarts), Ctrl-C / SIGTERM turned into the
// coordinator's graceful stop, and every child killed if the launcher dies.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/checkpoint/checkpoint_dir.h"
#include "common/platform/args.h"
#include "common/job/config.h"
#include "common/platform/env.h"
#include "common/net/grpc_util.h"
#include "common/platform/logging.h"
#include "common/platform/mutex.h"
#include "common/net/rpc_auth.h"
#include "common/net/stable_port.h"
#include "common/platform/status_macros.h"
#include "common/platform/workdir_lock.h"
#include "common/status/progress_line.h"
#include "proto/coordinator.grpc.pb.h"
#include "worker/cli/commands.h"
#include "worker/control/coordinator_client.h"
#include "worker/launch/child_process.h"
#include "worker/launch/supervisor.h"
#include "common/platform/clock.h"

namespace shardline {
namespace {

constexpr char kHelp[] =
    "usage: shardline launch --config FILE --workers N --workdir DIR [--max_restarts K]\n"
    "                        [--max_coordinator_restarts C] [--islands K] [--set a.b=value ...]\n"
    "\n"
    "Runs a coordinator and N workers on this host (loopback) and trains. Each\n"
    "process's lines are shown prefixed with its role and rank and kept in\n"
    "DIR/logs/. A worker that dies is restarted (same rank), at most K times in all\n"
    "(default 0), and a coordinator killed by a signal at most C times, a budget of\n"
    "its own (same address; it recovers from its RocksDB state); the world then\n"
    "restarts from the workers'\n"
    "in-memory snapshots or the last committed checkpoint. With\n"
    "runtime.min_workers set, a worker killed with no restarts left is not waited\n"
    "for: the job goes on with the others. Ctrl-C or SIGTERM stops the job\n"
    "gracefully: every worker finishes the same step, then all exit 0. If the\n"
    "launcher itself dies (even by SIGKILL), its children are killed with it;\n"
    "launching again with the same --workdir resumes the job.\n"
    "\n"
    "  --config FILE   job config (text proto); --set overrides fields\n"
    "  --workers N     world size (sets runtime.num_workers)\n"
    "  --islands K     DiLoCo islands of N/K workers (sets collective.islands; each\n"
    "                  worker gets --island, as it would on its own site)\n"
    "  --workdir DIR   metrics.jsonl, logs/, coordinator state\n"
    "  --max_restarts K  restarts of dead workers allowed over the whole job\n"
    "  --max_coordinator_restarts C  restarts of a killed coordinator (default K)\n"
    "  --token_file FILE the job token (a private file); default DIR/token, made\n"
    "                  afresh (mode 0600) by every launch. Workers get only\n"
    "                  DIR/credentials/rank-R\n"
    "  --tls_cert F --tls_key F --tls_ca F  mutual TLS for every process (PEM;\n"
    "                  the certificate must name 127.0.0.1); see docs/security.md\n";

std::atomic<int> g_signals{0};
void OnSignal(int) { g_signals.fetch_add(1); }

// On a terminal, redraws the live status line from the coordinator's Status
// RPC once a second until destroyed. The coordinator then logs no progress
// lines of its own (--progress_every_seconds 0), so nothing is shown twice.
class StatusLine {
 public:
  StatusLine(Env* env, const std::string& coordinator_address, const RpcAuth* auth)
      : client_(env, coordinator_address, auth), thread_([this] { Run(); }) {}
  ~StatusLine() {
    {
      MutexLock lock(&mu_);
      stop_ = true;
    }
    thread_.join();
    logging::SetStatusLine("");
  }

 private:
  void Run() {
    MutexLock lock(&mu_);
    auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_; };
    while (!mu_.AwaitWithTimeout(absl::Condition(&stopping), absl::Seconds(1))) {
      // A coordinator that is restarting simply leaves the last line up.
      absl::StatusOr<coordinator::JobStatus> status = client_.Status(absl::Milliseconds(500), false);
      if (status.ok()) logging::SetStatusLine(ProgressLine(*status));
    }
  }

  CoordinatorClient client_;
  Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

// The launch's flags, checked.
struct LaunchFlags {
  std::string config;
  std::string workdir;
  int workers = 0;
  int max_restarts = 0;
  int max_coordinator_restarts = 0;
  int islands = 0;  // --islands; 0: the config's collective.islands, and no --island for the workers
  std::vector<std::string> sets;  // --set, then runtime.num_workers (and collective.islands)
};

absl::StatusOr<LaunchFlags> ParseLaunchFlags(const Args& args) {
  for (const char* f : {"config", "workers", "workdir"}) {
    if (args.Get(f).empty()) return absl::InvalidArgumentError(absl::StrCat("--", f, " is required"));
  }
  LaunchFlags f;
  f.config = args.Get("config");
  f.workdir = args.Get("workdir");
  if (!absl::SimpleAtoi(args.Get("workers"), &f.workers) || f.workers < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--workers must be a positive integer, got '", args.Get("workers"), "'"));
  }
  if (args.Has("max_restarts") && (!absl::SimpleAtoi(args.Get("max_restarts"), &f.max_restarts) || f.max_restarts < 0)) {
    return absl::InvalidArgumentError("--max_restarts must be a non-negative integer");
  }
  // The coordinator's state is durable, so restarting it loses nothing; its
  // budget is its own, so workers that used theirs do not leave the job
  // without a coordinator (and the other way round).
  f.max_coordinator_restarts = f.max_restarts;
  if (args.Has("max_coordinator_restarts") &&
      (!absl::SimpleAtoi(args.Get("max_coordinator_restarts"), &f.max_coordinator_restarts) ||
       f.max_coordinator_restarts < 0)) {
    return absl::InvalidArgumentError("--max_coordinator_restarts must be a non-negative integer");
  }
  if (args.Has("islands") &&
      (!absl::SimpleAtoi(args.Get("islands"), &f.islands) || f.islands < 1 || f.workers % f.islands != 0)) {
    return absl::InvalidArgumentError(absl::StrCat("--islands must be a positive integer that divides --workers (",
                                                   f.workers, "), got '", args.Get("islands"), "'"));
  }
  f.sets = args.GetAll("set");
  f.sets.push_back(absl::StrCat("runtime.num_workers=", f.workers));
  if (f.islands > 0) f.sets.push_back(absl::StrCat("collective.islands=", f.islands));
  return f;
}

// The run's secrets. Secure by default: every run has a fresh token (a token
// that leaked in an earlier run of this workdir is worth nothing now),
// unless the user brings one. It stays in the workdir for `shardline status
// --workdir`. Each worker gets only its own rank's credential.
struct Secrets {
  std::string token_file;
  std::string token;
  std::vector<std::string> credential_files;  // by rank
  std::vector<std::string> tls_flags;         // passed on to every child
  std::optional<TlsPem> tls;
};

absl::StatusOr<Secrets> MakeSecrets(Env* env, const Args& args, const std::string& workdir, int workers) {
  Secrets s;
  s.token_file = args.Has("token_file") ? args.Get("token_file") : workdir + "/token";
  if (args.Has("token_file")) {
    ASSIGN_OR_RETURN(s.token, LoadToken(env, s.token_file));
    ASSIGN_OR_RETURN(const Credential credential, ParseCredential(s.token));
    RETURN_IF_ERROR(RequireJobToken(credential, absl::StrCat("--token_file ", s.token_file), "launch"));
  } else {
    ASSIGN_OR_RETURN(s.token, NewToken());
    RETURN_IF_ERROR(WritePrivateFile(s.token_file, s.token));
  }
  RETURN_IF_ERROR(Annotate(env->CreateDirs(workdir + "/credentials"), "creating --workdir"));
  for (int r = 0; r < workers; ++r) {
    s.credential_files.push_back(absl::StrCat(workdir, "/credentials/rank-", r));
    RETURN_IF_ERROR(WritePrivateFile(s.credential_files.back(), RankCredentialText(s.token, r)));
  }
  ASSIGN_OR_RETURN(s.tls, LoadTls(env, args.Get("tls_cert"), args.Get("tls_key"), args.Get("tls_ca")));
  if (s.tls.has_value()) {
    for (const char* f : {"tls_cert", "tls_key", "tls_ca"}) {
      s.tls_flags.push_back(absl::StrCat("--", f));
      s.tls_flags.push_back(args.Get(f));
    }
  }
  return s;
}

// A restarted coordinator must come back where the workers look for it, so
// its port is one the kernel hands to nobody else in the meantime.
std::string CoordinatorListen(Env* env) {
  absl::StatusOr<int> port = PickStablePort(env, "127.0.0.1");
  if (port.ok()) return absl::StrCat("127.0.0.1:", *port);
  SLOG(WARNING) << "launch: " << port.status().message()
                << "; the coordinator listens on a port from the ephemeral range, which a restart may find taken";
  return "127.0.0.1:0";
}

std::vector<std::string> CoordinatorArgv(Env* env, const LaunchFlags& f, const Secrets& secrets, bool live_status) {
  std::vector<std::string> argv = {ExecutableDir() + "/shardline-coordinator", "--config", f.config,
                                   "--listen", CoordinatorListen(env), "--workdir", f.workdir,
                                   "--metrics_listen", "127.0.0.1:0", "--token_file", secrets.token_file};
  argv.insert(argv.end(), secrets.tls_flags.begin(), secrets.tls_flags.end());
  if (live_status) {
    argv.push_back("--progress_every_seconds");
    argv.push_back("0");
  }
  for (const std::string& s : f.sets) {
    argv.push_back("--set");
    argv.push_back(s);
  }
  return argv;
}

std::vector<std::string> WorkerArgv(const std::string& address, int rank, const LaunchFlags& f,
                                    const Secrets& secrets) {
  std::vector<std::string> argv = {ExecutableDir() + "/shardline-worker", "--coordinator", address, "--listen",
                                   "127.0.0.1:0", "--metrics_listen", "127.0.0.1:0", "--rank",
                                   std::to_string(rank), "--token_file",
                                   secrets.credential_files[static_cast<size_t>(rank)]};
  if (f.islands > 0) {  // as each site's workers would say where they are
    argv.push_back("--island");
    argv.push_back(std::to_string(rank / (f.workers / f.islands)));
  }
  argv.insert(argv.end(), secrets.tls_flags.begin(), secrets.tls_flags.end());
  return argv;
}

// The address the coordinator wrote once listening, within 30 s.
absl::StatusOr<std::string> AwaitCoordinator(Env* env, ChildProcess& coordinator, const std::string& workdir) {
  const absl::Time deadline = MonotonicNow(env) + absl::Seconds(30);
  for (;;) {
    absl::StatusOr<std::string> a = env->ReadFile(workdir + "/coordinator.address", kMaxSmallFileBytes);
    if (a.ok() && !a->empty()) return *a;
    int status;
    if (waitpid(coordinator.pid(), &status, WNOHANG) == coordinator.pid()) {
      coordinator.Exited();
      return absl::InternalError("the coordinator exited before listening; see " + workdir + "/logs/coordinator.log");
    }
    if (MonotonicNow(env) > deadline) {
      coordinator.Signal(SIGKILL);
      return absl::DeadlineExceededError("the coordinator did not start listening within 30 s");
    }
    env->SleepForMicros(20'000);
  }
}

// Carries out what the supervisor decided.
absl::Status Apply(const Actions& a, ChildProcess& coordinator, std::vector<std::unique_ptr<ChildProcess>>& workers) {
  for (const std::string& w : a.warnings) SLOG(WARNING) << w;
  for (const std::string& i : a.infos) SLOG(INFO) << i;
  if (a.signal_coordinator != 0) coordinator.Signal(a.signal_coordinator);
  if (a.signal_workers != 0) {
    for (auto& w : workers) w->Signal(a.signal_workers);
  }
  if (a.restart_coordinator) {
    if (a.coordinator_stop_requested) coordinator.AddArgOnce("--stop_requested");
    RETURN_IF_ERROR(coordinator.Start());
  }
  for (int r : a.restart_workers) RETURN_IF_ERROR(workers[static_cast<size_t>(r)]->Start());
  return absl::OkStatus();
}

// Reaps children and applies the supervisor's decisions until none runs.
// The supervisor's times are durations: the monotonic clock.
absl::Status Supervise(Env* env, Supervisor& supervisor, ChildProcess& coordinator,
                       std::vector<std::unique_ptr<ChildProcess>>& workers) {
  int signals_seen = 0;
  for (;;) {
    if (const int signals = g_signals.load(); signals > signals_seen) {
      signals_seen = signals;
      RETURN_IF_ERROR(Apply(supervisor.OnSignal(), coordinator, workers));
    }
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      if (pid == coordinator.pid()) {
        coordinator.Exited();
        RETURN_IF_ERROR(Apply(supervisor.OnCoordinatorExit(ExitOf(status), MonotonicNow(env)), coordinator, workers));
      }
      for (size_t r = 0; r < workers.size(); ++r) {
        if (pid != workers[r]->pid()) continue;
        workers[r]->Exited();
        RETURN_IF_ERROR(
            Apply(supervisor.OnWorkerExit(static_cast<int>(r), ExitOf(status), MonotonicNow(env)), coordinator, workers));
      }
      continue;
    }
    bool workers_running = false;
    for (auto& w : workers) workers_running = workers_running || w->running();
    if (!coordinator.running() && !workers_running) return absl::OkStatus();
    RETURN_IF_ERROR(
        Apply(supervisor.OnTick(coordinator.running(), workers_running, MonotonicNow(env)), coordinator, workers));
    env->SleepForMicros(20'000);
  }
}

absl::Status Launch(const Args& args) {
  Env* env = Env::Default();
  ASSIGN_OR_RETURN(const LaunchFlags flags, ParseLaunchFlags(args));
  // Fail here, with the config's own error, rather than in a child.
  ASSIGN_OR_RETURN(const config::JobConfig cfg, LoadConfig(env, flags.config, flags.sets));
  const std::string& workdir = flags.workdir;
  // One owner per workdir, taken before anything in it changes (a refused
  // launch leaves the running job's coordinator.address and token alone),
  // and handed to the coordinator it starts.
  ASSIGN_OR_RETURN(const std::unique_ptr<WorkdirLock> lock, WorkdirLock::Acquire(env, workdir, "shardline launch"));
  lock->ShareWithChildren();
  RETURN_IF_ERROR(Annotate(env->CreateDirs(workdir + "/logs"), "creating --workdir"));
  RETURN_IF_ERROR(CheckWritableDir(env, CheckpointRoot(workdir)));  // here, not at the first save
  std::remove((workdir + "/coordinator.address").c_str());
  ASSIGN_OR_RETURN(Secrets secrets, MakeSecrets(env, args, workdir, flags.workers));
  RpcAuth auth(env, secrets.token);
  if (secrets.tls.has_value()) auth.set_tls(std::move(*secrets.tls));

  const bool live_status = logging::StderrIsTerminal();
  ChildProcess coordinator(env, "coordinator", CoordinatorArgv(env, flags, secrets, live_status),
                           workdir + "/logs/coordinator.log");
  RETURN_IF_ERROR(coordinator.Start());
  ASSIGN_OR_RETURN(const std::string address, AwaitCoordinator(env, coordinator, workdir));
  coordinator.SetArg("--listen", address);
  std::unique_ptr<StatusLine> status_line;
  if (live_status) status_line = std::make_unique<StatusLine>(env, address, &auth);
  std::vector<std::unique_ptr<ChildProcess>> workers;
  for (int r = 0; r < flags.workers; ++r) {
    workers.push_back(std::make_unique<ChildProcess>(env, absl::StrCat("worker ", r), WorkerArgv(address, r, flags, secrets),
                                                     absl::StrCat(workdir, "/logs/worker-", r, ".log")));
    RETURN_IF_ERROR(workers.back()->Start());
  }
  SupervisorOptions options;
  options.workers = flags.workers;
  options.max_restarts = flags.max_restarts;
  options.max_coordinator_restarts = flags.max_coordinator_restarts;
  // An elastic job goes on without a worker that cannot be restarted.
  options.min_workers = cfg.runtime().min_workers();
  options.islands = cfg.collective().islands();
  options.min_islands = cfg.runtime().min_islands();
  options.workdir = workdir;
  Supervisor supervisor(options);
  RETURN_IF_ERROR(Supervise(env, supervisor, coordinator, workers));
  status_line.reset();
  if (supervisor.outcome().ok()) {
    SLOG(INFO) << "job done; metrics in " << workdir << "/metrics.jsonl, logs in " << workdir << "/logs/";
  }
  return supervisor.outcome();
}

}  // namespace

int LaunchCommand(int argc, char** argv) {
  Args args;
  absl::Status parsed = ParseArgs(argc, argv, 2, {{"config", "workers", "workdir", "max_restarts", "max_coordinator_restarts", "islands", "token_file",
                                   "tls_cert", "tls_key", "tls_ca"}, {"set"}},
                                  "shardline launch", &args);
  struct sigaction sa = {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  return RunCommand(parsed, args, kHelp, "shardline launch", Launch);
}

}  // namespace shardline
