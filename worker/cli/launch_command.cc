// shardline launch: a coordinator and N workers as child processes on this
// host, with their output prefixed and kept in <workdir>/logs/, dead workers
// restarted (up to --max_restarts), Ctrl-C / SIGTERM turned into the
// coordinator's graceful stop, and every child killed if the launcher dies.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
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
#include "common/platform/clock.h"

namespace shardline {
namespace {

constexpr char kHelp[] =
    "usage: shardline launch --config FILE --workers N --workdir DIR [--max_restarts K]\n"
    "                        [--max_coordinator_restarts C] [--set a.b=value ...]\n"
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

std::string SelfDir() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  std::string path(buf, static_cast<size_t>(n));
  return path.substr(0, path.rfind('/'));
}

// On a terminal, redraws the live status line from the coordinator's Status
// RPC once a second until destroyed. The coordinator then logs no progress
// lines of its own (--progress_every_seconds 0), so nothing is shown twice.
class StatusLine {
 public:
  StatusLine(const std::string& coordinator_address, const RpcAuth* auth)
      : client_(coordinator_address, auth), thread_([this] { Run(); }) {}
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

// A child process whose stdout and stderr lines are prefixed, echoed to our
// stderr and appended to a log file.
class Child {
 public:
  Child(std::string name, std::vector<std::string> argv, const std::string& log_path)
      : name_(std::move(name)), argv_(std::move(argv)), log_path_(log_path) {}
  ~Child() {
    if (pump_.joinable()) pump_.join();
  }

  // For the next Start(), once.
  void AddArgOnce(const std::string& arg) {
    if (std::find(argv_.begin(), argv_.end(), arg) == argv_.end()) argv_.push_back(arg);
  }

  absl::Status Start() {
    if (pump_.joinable()) pump_.join();
    int fds[2];
    if (pipe(fds) != 0) return absl::InternalError("pipe failed");
    const pid_t launcher = getpid();
    pid_ = fork();
    if (pid_ < 0) return absl::InternalError("fork failed");
    if (pid_ == 0) {
      // Children die with the launcher, however it dies (SIGKILL included):
      // nothing runs unsupervised, and launching again resumes from the
      // last committed checkpoint. Forks happen on the launcher's main
      // thread, whose exit is the process's.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != launcher) _exit(1);  // it died before prctl
      setpgid(0, 0);  // terminal Ctrl-C goes to the launcher, which decides
      dup2(fds[1], STDOUT_FILENO);
      dup2(fds[1], STDERR_FILENO);
      close(fds[0]);
      close(fds[1]);
      std::vector<char*> args;
      for (const std::string& a : argv_) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      execv(args[0], args.data());
      fprintf(stderr, "cannot execute %s\n", args[0]);
      _exit(127);
    }
    close(fds[1]);
    running_ = true;
    pump_ = std::thread([this, fd = fds[0]] { Pump(fd); });
    return absl::OkStatus();
  }

  void Signal(int sig) {
    if (running_) kill(pid_, sig);
  }
  pid_t pid() const { return pid_; }
  bool running() const { return running_; }
  // Replaces an argument's value for the next Start (e.g. a fixed port).
  void SetArg(const std::string& flag, const std::string& value) {
    for (size_t i = 0; i + 1 < argv_.size(); ++i) {
      if (argv_[i] == flag) argv_[i + 1] = value;
    }
  }
  void Exited() { running_ = false; }
  const std::string& name() const { return name_; }

 private:
  void Pump(int fd) {
    // The child's log file; without one (unwritable), its lines still reach
    // launch's own output.
    absl::StatusOr<std::unique_ptr<WritableFile>> log = Env::Default()->NewAppendableFile(log_path_);
    FILE* in = fdopen(fd, "r");
    char* line = nullptr;
    size_t cap = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, in)) > 0) {
      std::string text(line, static_cast<size_t>(n));
      if (log.ok() && !((*log)->Append(text).ok() && (*log)->Flush().ok())) log = absl::DataLossError("");
      while (!text.empty() && text.back() == '\n') text.pop_back();
      // The children's own log lines already name them.
      const std::string tag = absl::StrCat("[", name_, "]");
      const std::string out =
          text.find(tag) != std::string::npos ? text + "\n" : absl::StrCat(tag, " ", text, "\n");
      logging::WriteRaw(out);
    }
    free(line);
    fclose(in);
    if (log.ok()) static_cast<void>((*log)->Close());
  }

  const std::string name_;
  std::vector<std::string> argv_;
  const std::string log_path_;
  pid_t pid_ = -1;
  bool running_ = false;
  std::thread pump_;
};

absl::Status Launch(const Args& args) {
  Env* env = Env::Default();
  for (const char* f : {"config", "workers", "workdir"}) {
    if (args.Get(f).empty()) return absl::InvalidArgumentError(absl::StrCat("--", f, " is required"));
  }
  int workers = 0;
  if (!absl::SimpleAtoi(args.Get("workers"), &workers) || workers < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--workers must be a positive integer, got '", args.Get("workers"), "'"));
  }
  int max_restarts = 0;
  if (args.Has("max_restarts") && (!absl::SimpleAtoi(args.Get("max_restarts"), &max_restarts) || max_restarts < 0)) {
    return absl::InvalidArgumentError("--max_restarts must be a non-negative integer");
  }
  // The coordinator's state is durable, so restarting it loses nothing; its
  // budget is its own, so workers that used theirs do not leave the job
  // without a coordinator (and the other way round).
  int max_coordinator_restarts = max_restarts;
  if (args.Has("max_coordinator_restarts") &&
      (!absl::SimpleAtoi(args.Get("max_coordinator_restarts"), &max_coordinator_restarts) ||
       max_coordinator_restarts < 0)) {
    return absl::InvalidArgumentError("--max_coordinator_restarts must be a non-negative integer");
  }
  std::vector<std::string> sets = args.GetAll("set");
  sets.push_back(absl::StrCat("runtime.num_workers=", workers));
  // Fail here, with the config's own error, rather than in a child.
  ASSIGN_OR_RETURN(const config::JobConfig cfg, LoadConfig(env, args.Get("config"), sets));
  // An elastic job goes on without a worker that cannot be restarted.
  const bool elastic = cfg.runtime().min_workers() > 0;
  int workers_gone = 0;
  const std::string workdir = args.Get("workdir");
  // One owner per workdir, taken before anything in it changes (a refused
  // launch leaves the running job's coordinator.address and token alone),
  // and handed to the coordinator it starts.
  ASSIGN_OR_RETURN(const std::unique_ptr<WorkdirLock> lock, WorkdirLock::Acquire(workdir, "shardline launch"));
  lock->ShareWithChildren();
  RETURN_IF_ERROR(Annotate(env->CreateDirs(workdir + "/logs"), "creating --workdir"));
  RETURN_IF_ERROR(CheckWritableDir(env, CheckpointRoot(workdir)));  // here, not at the first save
  const std::string address_file = workdir + "/coordinator.address";
  std::remove(address_file.c_str());
  // Secure by default: every run has a fresh token (a token that leaked in
  // an earlier run of this workdir is worth nothing now), unless the user
  // brings one. It stays in the workdir for `shardline status --workdir`.
  // Each worker gets only its own rank's credential.
  const std::string token_file = args.Has("token_file") ? args.Get("token_file") : workdir + "/token";
  std::string token;
  if (args.Has("token_file")) {
    ASSIGN_OR_RETURN(token, LoadToken(env, token_file));
    ASSIGN_OR_RETURN(const Credential credential, ParseCredential(token));
    if (credential.rank >= 0) {
      return absl::InvalidArgumentError(absl::StrCat("--token_file ", token_file, " holds rank ", credential.rank,
                                                     "'s credential; launch needs the job token"));
    }
  } else {
    ASSIGN_OR_RETURN(token, NewToken());
    RETURN_IF_ERROR(WritePrivateFile(token_file, token));
  }
  RETURN_IF_ERROR(Annotate(env->CreateDirs(workdir + "/credentials"), "creating --workdir"));
  std::vector<std::string> credential_files;
  for (int r = 0; r < workers; ++r) {
    credential_files.push_back(absl::StrCat(workdir, "/credentials/rank-", r));
    RETURN_IF_ERROR(WritePrivateFile(credential_files.back(), RankCredentialText(token, r)));
  }
  RpcAuth auth(token);
  ASSIGN_OR_RETURN(std::optional<TlsPem> tls,
                   LoadTls(env, args.Get("tls_cert"), args.Get("tls_key"), args.Get("tls_ca")));
  std::vector<std::string> tls_flags;
  if (tls.has_value()) {
    auth.set_tls(std::move(*tls));
    for (const char* f : {"tls_cert", "tls_key", "tls_ca"}) {
      tls_flags.push_back(absl::StrCat("--", f));
      tls_flags.push_back(args.Get(f));
    }
  }

  // A restarted coordinator must come back where the workers look for it, so
  // its port is one the kernel hands to nobody else in the meantime.
  std::string coord_listen = "127.0.0.1:0";
  if (absl::StatusOr<int> port = PickStablePort("127.0.0.1"); port.ok()) {
    coord_listen = absl::StrCat("127.0.0.1:", *port);
  } else {
    SLOG(WARNING) << "launch: " << port.status().message()
                  << "; the coordinator listens on a port from the ephemeral range, which a restart may find taken";
  }
  const std::string bin = SelfDir();
  std::vector<std::string> coord_argv = {bin + "/shardline-coordinator", "--config", args.Get("config"),
                                         "--listen", coord_listen, "--workdir", workdir,
                                         "--metrics_listen", "127.0.0.1:0", "--token_file", token_file};
  coord_argv.insert(coord_argv.end(), tls_flags.begin(), tls_flags.end());
  const bool live_status = logging::StderrIsTerminal();
  if (live_status) {
    coord_argv.push_back("--progress_every_seconds");
    coord_argv.push_back("0");
  }
  for (const std::string& s : sets) {
    coord_argv.push_back("--set");
    coord_argv.push_back(s);
  }
  Child coordinator("coordinator", coord_argv, workdir + "/logs/coordinator.log");
  RETURN_IF_ERROR(coordinator.Start());

  std::string address;
  const absl::Time deadline = WallNow() + absl::Seconds(30);
  while (address.empty()) {
    absl::StatusOr<std::string> a = env->ReadFile(address_file);
    if (a.ok()) address = *a;
    int status;
    if (waitpid(coordinator.pid(), &status, WNOHANG) == coordinator.pid()) {
      coordinator.Exited();
      return absl::InternalError("the coordinator exited before listening; see " + workdir + "/logs/coordinator.log");
    }
    if (WallNow() > deadline) {
      coordinator.Signal(SIGKILL);
      return absl::DeadlineExceededError("the coordinator did not start listening within 30 s");
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  coordinator.SetArg("--listen", address);
  std::unique_ptr<StatusLine> status_line;
  if (live_status) status_line = std::make_unique<StatusLine>(address, &auth);

  std::vector<std::unique_ptr<Child>> children;
  for (int r = 0; r < workers; ++r) {
    std::vector<std::string> worker_argv = {bin + "/shardline-worker", "--coordinator", address, "--listen",
                                            "127.0.0.1:0", "--metrics_listen", "127.0.0.1:0", "--rank",
                                            std::to_string(r), "--token_file", credential_files[static_cast<size_t>(r)]};
    worker_argv.insert(worker_argv.end(), tls_flags.begin(), tls_flags.end());
    children.push_back(std::make_unique<Child>(absl::StrCat("worker ", r), std::move(worker_argv),
                                               absl::StrCat(workdir, "/logs/worker-", r, ".log")));
    RETURN_IF_ERROR(children.back()->Start());
  }

  int restarts = 0, coordinator_restarts = 0, signals_seen = 0;
  absl::Status outcome;
  bool coordinator_done = false;
  absl::Time coordinator_exit;
  absl::Time failed_at = absl::InfinitePast();
  // A worker exits 0 only once the coordinator has durably recorded that
  // every worker finished: when all have, the job is over whatever the
  // coordinator does next (a restarted one exits within seconds; one that
  // does not gets kCoordinatorAfterWorkers, then SIGTERM, then SIGKILL).
  constexpr absl::Duration kCoordinatorAfterWorkers = absl::Seconds(10);
  std::vector<bool> finished(children.size(), false);
  absl::Time workers_finished_at = absl::InfinitePast();
  bool killed_after_end = false;
  bool coordinator_termed = false;
  for (;;) {
    const int signals = g_signals.load();
    if (signals > signals_seen) {
      if (signals_seen == 0) {
        SLOG(INFO) << "stopping the job gracefully (again to kill it)";
        coordinator.Signal(SIGTERM);
      } else {
        coordinator.Signal(SIGKILL);
        for (auto& c : children) c->Signal(SIGKILL);
        outcome = absl::AbortedError("killed by a second signal");
      }
      signals_seen = signals;
    }
    const bool workers_finished = workers_finished_at != absl::InfinitePast();
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      // Exit code 1 is a process's own error (bad config, bad data, ...;
      // docs/operations.md): a restart would meet it again. Signals, the
      // watchdog's 3 and the like are worth a restart.
      const bool deterministic = WIFEXITED(status) && WEXITSTATUS(status) == 1;
      const std::string how = WIFEXITED(status) ? absl::StrCat("exit code ", WEXITSTATUS(status))
                                                : absl::StrCat("signal ", WTERMSIG(status));
      if (pid == coordinator.pid()) {
        coordinator.Exited();
        const bool killed = WIFSIGNALED(status);
        if (killed && outcome.ok() && !workers_finished && coordinator_restarts < max_coordinator_restarts) {
          // It recovers its state from RocksDB; the workers reconnect (or,
          // if they all finished meanwhile, it finds the job over). Lost
          // during a graceful stop, it is told so: its first world stops.
          ++coordinator_restarts;
          SLOG(WARNING) << "the coordinator died (" << how << "); restarting it (" << coordinator_restarts << "/"
                        << max_coordinator_restarts << ")"
                        << (signals_seen > 0 ? "; it goes on with the graceful stop" : "");
          if (signals_seen > 0) coordinator.AddArgOnce("--stop_requested");
          RETURN_IF_ERROR(coordinator.Start());
          continue;
        }
        coordinator_done = true;
        coordinator_exit = WallNow();
        if (workers_finished && !ok) {
          SLOG(WARNING) << "the coordinator ended with " << how << " after every worker finished; the job is done";
        } else if (!ok && outcome.ok()) {
          outcome = absl::InternalError(absl::StrCat(
              "the coordinator failed (", how, ")",
              killed && coordinator_restarts >= max_coordinator_restarts ? "; no coordinator restarts left" : ""));
        }
        if (!ok && !workers_finished) {
          // The job is over and nobody will coordinate the workers again:
          // stop them now rather than after the grace period below.
          for (auto& c : children) c->Signal(SIGTERM);
        }
      }
      for (size_t r = 0; r < children.size(); ++r) {
        Child& c = *children[r];
        if (pid != c.pid()) continue;
        c.Exited();
        if (ok) {
          finished[r] = true;
          if (std::count(finished.begin(), finished.end(), true) + workers_gone ==
                  static_cast<int>(children.size()) &&
              !workers_finished) {
            workers_finished_at = WallNow();
          }
          break;
        }
        if (killed_after_end && outcome.ok()) {
          // The final checkpoint is committed and the coordinator said so:
          // a worker that would not exit afterwards does not undo that.
          SLOG(WARNING) << c.name() << " did not exit within 30 s of the job's end and was killed; the job is done";
          break;
        }
        // During a graceful stop too: the world it rejoins stops after
        // one step and saves (a second signal fails `outcome`).
        if (!deterministic && !coordinator_done && outcome.ok() && restarts < max_restarts) {
          ++restarts;
          SLOG(WARNING) << c.name() << " died (" << how << "); restarting it (" << restarts << "/" << max_restarts << ")";
          RETURN_IF_ERROR(c.Start());
        } else if (elastic && !deterministic && !coordinator_done && outcome.ok() &&
                   static_cast<int>(children.size()) - (workers_gone + 1) >= cfg.runtime().min_workers()) {
          ++workers_gone;
          SLOG(WARNING) << c.name() << " died (" << how << "); no restarts left; the job goes on with "
                        << children.size() - static_cast<size_t>(workers_gone)
                        << " workers (runtime.min_workers=" << cfg.runtime().min_workers() << ")";
        } else if (outcome.ok()) {
          outcome = deterministic
                        ? absl::FailedPreconditionError(absl::StrCat(
                              c.name(), " stopped with an error (exit code 1; its last lines above and ", workdir,
                              "/logs/ say which); not restarting it: the same error would recur"))
                        : absl::InternalError(absl::StrCat(c.name(), " failed (", how, ")",
                                                           restarts >= max_restarts ? "; no restarts left" : ""));
          coordinator.Signal(SIGTERM);
        }
      }
    } else {
      bool any = coordinator.running();
      for (auto& c : children) any = any || c->running();
      if (!any) break;
      // Workers finish on their own once the coordinator has: 30 s of grace
      // after a clean end, 5 s after a failed one (they were sent SIGTERM).
      const absl::Duration grace = outcome.ok() ? absl::Seconds(30) : absl::Seconds(5);
      if (coordinator_done && WallNow() - coordinator_exit > grace) {
        for (auto& c : children) {
          if (c->running()) {
            c->Signal(SIGKILL);
            killed_after_end = killed_after_end || outcome.ok();
          }
        }
      }
      // Every worker finished: the coordinator has a bounded time to end.
      if (workers_finished && coordinator.running()) {
        const absl::Duration since = WallNow() - workers_finished_at;
        if (since > kCoordinatorAfterWorkers + absl::Seconds(5)) {
          coordinator.Signal(SIGKILL);
        } else if (since > kCoordinatorAfterWorkers && !coordinator_termed) {
          SLOG(WARNING) << "every worker finished " << absl::FormatDuration(since)
                        << " ago and the coordinator is still running; stopping it";
          coordinator.Signal(SIGTERM);
          coordinator_termed = true;
        }
      }
      // A failed job gets 30 s to stop gracefully (the coordinator was sent
      // SIGTERM), then everything is killed: no wait without an end.
      if (!outcome.ok() && failed_at == absl::InfinitePast()) failed_at = WallNow();
      if (!outcome.ok() && WallNow() - failed_at > absl::Seconds(30)) {
        coordinator.Signal(SIGKILL);
        for (auto& c : children) c->Signal(SIGKILL);
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
  }
  status_line.reset();
  if (outcome.ok()) SLOG(INFO) << "job done; metrics in " << workdir << "/metrics.jsonl, logs in " << workdir << "/logs/";
  return outcome;
}

}  // namespace

int LaunchCommand(int argc, char** argv) {
  Args args;
  absl::Status parsed = ParseArgs(argc, argv, 2, {"config", "workers", "workdir", "max_restarts", "max_coordinator_restarts", "token_file",
                                   "tls_cert", "tls_key", "tls_ca"},
                                  {"set"},
                                  "shardline launch", &args);
  struct sigaction sa = {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  return RunCommand(parsed, args, kHelp, "shardline launch", Launch);
}

}  // namespace shardline
