// shardline_chaos: a job on simulated hosts, faults at random moments from a
// recorded seed, and the checks that the job came through: it finished, its
// final parameters are an uninterrupted run's bit for bit, every committed
// checkpoint verifies and none was lost. Per fault it records the time to
// detect it, the time to the first step completed after it, and the steps
// redone. The short run is a CTest case; the long one is bench/drivers/chaos.sh.
//
// The coordinator and each worker run on a host of their own: a network
// namespace on a bridge (tests/chaos/topology.h). The harness is their
// supervisor, as Slurm or Kubernetes would be: a process that dies is
// started again after 0.5 s; one that exits 0 is done.
//
//   shardline_chaos --workdir DIR [--seed S] [--rounds R] [--kinds a,b]
//                   [--workers N] [--islands K] [--total_steps T] [--report FILE]
//
// --islands K: the job in K DiLoCo islands (collective.islands, an outer
// step every 100 steps), each worker told its island (--island).
//
// Exit: 0 every check passed; 1 a check failed (the output says which);
// 77 this machine cannot create network namespaces (not root, no `ip`).
#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/platform/args.h"
#include "common/checkpoint/checkpoint_dir.h"
#include "common/platform/env.h"
#include "common/platform/status_macros.h"
#include "tests/chaos/command.h"
#include "tests/chaos/host_process.h"
#include "tests/chaos/probe.h"
#include "tests/chaos/topology.h"
#include "tests/e2e/e2e_util.h"
#include "tests/e2e/final_state.h"
#include "tests/e2e/subprocess.h"

namespace shardline {
namespace {

constexpr int kSkip = 77;

// SIGINT or SIGTERM: stop injecting, kill the job, remove what was created.
std::atomic<bool> g_stop{false};
void OnStop(int) { g_stop = true; }
constexpr int kCoordinatorPort = 7000;
constexpr int kWorkerPort = 7100;
// A stuck job is a failed check, not a hang of the harness.
constexpr absl::Duration kRecoveryBound = absl::Seconds(120);

enum class Kind {
  kKillWorker,
  kKillCoordinator,
  kPauseWorker,
  kPauseCoordinator,
  kLinkDown,
  kBlackHole,
  kSqueeze,
  kDiskFull,
  kSlowDisk,
  kDelay,
  kLoss,
  kReorder,
};
const std::vector<std::pair<Kind, std::string>>& KindNames() {
  static const auto* names = new std::vector<std::pair<Kind, std::string>>{
      {Kind::kKillWorker, "kill_worker"},   {Kind::kKillCoordinator, "kill_coordinator"},
      {Kind::kPauseWorker, "pause_worker"}, {Kind::kPauseCoordinator, "pause_coordinator"},
      {Kind::kLinkDown, "link_down"},       {Kind::kBlackHole, "black_hole"},
      {Kind::kSqueeze, "squeeze"},          {Kind::kDiskFull, "disk_full"},
      {Kind::kSlowDisk, "slow_disk"},       {Kind::kDelay, "delay"},
      {Kind::kLoss, "loss"},                {Kind::kReorder, "reorder"}};
  return *names;
}
std::string Name(Kind k) {
  for (const auto& [kind, name] : KindNames()) {
    if (kind == k) return name;
  }
  return "?";
}

struct Flags {
  std::string workdir;
  uint64_t seed = 0;
  int rounds = 1;
  std::vector<Kind> kinds;
  int workers = 2;
  int islands = 1;
  int64_t total_steps = 40000;
  std::string report;
};

// One injected fault and what became of it.
struct FaultRecord {
  Kind kind;
  std::string target;      // "coordinator" or "worker K"
  double at_seconds = 0;   // since the chaos run started
  double held_seconds = 0;
  bool detected = false;   // the world moved to a new generation
  double detect_seconds = 0;
  bool recovered = false;
  double recover_seconds = 0;  // from the end of the fault (or its detection, if later) to the next step
  int64_t steps_redone = 0;
  std::string note;
};

std::string Json(const FaultRecord& f) {
  return absl::StrCat("{\"kind\":\"", Name(f.kind), "\",\"target\":\"", f.target, "\",\"at_s\":", f.at_seconds,
                      ",\"held_s\":", f.held_seconds, ",\"detected\":", f.detected ? "true" : "false",
                      ",\"detect_s\":", f.detect_seconds, ",\"recovered\":", f.recovered ? "true" : "false",
                      ",\"recover_s\":", f.recover_seconds, ",\"steps_redone\":", f.steps_redone, ",\"note\":\"",
                      f.note, "\"}");
}

// Removes namespaces left by a harness that was killed (their names carry
// its pid).
void RemoveStaleNamespaces() {
  absl::StatusOr<std::vector<std::string>> names = Env::Default()->GetChildren("/run/netns");
  if (!names.ok()) return;
  for (const std::string& n : *names) {
    if (n.rfind("slc", 0) != 0) continue;
    const size_t end = n.find_first_not_of("0123456789", 3);
    int pid = 0;
    if (!absl::SimpleAtoi(n.substr(3, end - 3), &pid)) continue;
    if (pid == getpid() || kill(pid, 0) == 0) continue;
    RunCommand({"/usr/sbin/ip", "netns", "del", n}).IgnoreError();
  }
}

class ScopedTmpfs {
 public:
  static absl::StatusOr<std::unique_ptr<ScopedTmpfs>> Mount(const std::string& dir, int64_t bytes) {
    RETURN_IF_ERROR(Env::Default()->CreateDirs(dir));
    if (mount("tmpfs", dir.c_str(), "tmpfs", 0, absl::StrCat("size=", bytes).c_str()) != 0) {
      return absl::InternalError(absl::StrCat("mount tmpfs on ", dir, ": ", std::strerror(errno)));
    }
    return std::unique_ptr<ScopedTmpfs>(new ScopedTmpfs(dir));
  }
  ~ScopedTmpfs() { umount2(dir_.c_str(), MNT_DETACH); }
  // A new size; at most what is used makes every new write fail ENOSPC.
  absl::Status Resize(int64_t bytes) {
    if (mount("tmpfs", dir_.c_str(), "tmpfs", MS_REMOUNT, absl::StrCat("size=", bytes).c_str()) != 0) {
      return absl::InternalError(absl::StrCat("remount ", dir_, ": ", std::strerror(errno)));
    }
    return absl::OkStatus();
  }
  int64_t Used() const {
    struct statvfs s;
    if (statvfs(dir_.c_str(), &s) != 0) return 0;
    return static_cast<int64_t>(s.f_blocks - s.f_bfree) * static_cast<int64_t>(s.f_frsize);
  }

 private:
  explicit ScopedTmpfs(std::string dir) : dir_(std::move(dir)) {}
  std::string dir_;
};

std::vector<std::string> JobSets(const Flags& f) {
  std::vector<std::string> sets = {absl::StrCat("runtime.num_workers=", f.workers),
                                   absl::StrCat("train.total_steps=", f.total_steps),
                                   "checkpoint.every_steps=500",
                                   "runtime.collective_timeout_seconds=5",
                                   "checkpoint.keep_last=100000",
                                   "train.log_every=1000",
                                   "train.eval_every=0"};
  if (f.islands > 1) {  // checkpoints every 5 outer steps, in-memory snapshots at each
    sets.insert(sets.end(), {absl::StrCat("collective.islands=", f.islands), "collective.diloco.inner_steps=100",
                             "checkpoint.memory_every_steps=100"});
  }
  return sets;
}

// The job on simulated hosts, supervised.
class ChaosRun {
 public:
  ChaosRun(const Flags& flags, Topology* net, std::string dir) : flags_(flags), net_(net), dir_(std::move(dir)) {}

  absl::Status Start() {
    RETURN_IF_ERROR(Env::Default()->CreateDirs(dir_ + "/logs"));
    ASSIGN_OR_RETURN(disk_, ScopedTmpfs::Mount(dir_ + "/checkpoints", int64_t{1} << 30));
    RETURN_IF_ERROR(WriteFileAtomically(Env::Default(), dir_ + "/token", "chaos-token-0123456789abcdef0123456789"));
    chmod((dir_ + "/token").c_str(), 0600);
    slow_disk_file_ = dir_ + "/slow_disk_ms";
    std::vector<std::string> env = {"SHARDLINE_SLOW_DISK_FILE=" + slow_disk_file_};
    std::vector<std::string> coord = {BinPath("shardline-coordinator"), "--config", DefaultConfig(), "--listen",
                                      absl::StrCat(net_->Address(0), ":", kCoordinatorPort), "--workdir", dir_,
                                      "--metrics_listen", "127.0.0.1:0", "--token_file", dir_ + "/token"};
    for (const std::string& s : JobSets(flags_)) {
      coord.push_back("--set");
      coord.push_back(s);
    }
    procs_.push_back(std::make_unique<HostProcess>("coordinator", net_->NetnsPath(0), coord, env,
                                                   dir_ + "/logs/coordinator.log"));
    for (int r = 0; r < flags_.workers; ++r) {
      std::vector<std::string> w = {BinPath("shardline-worker"), "--coordinator",
                                    absl::StrCat(net_->Address(0), ":", kCoordinatorPort), "--listen",
                                    absl::StrCat(net_->Address(r + 1), ":", kWorkerPort), "--metrics_listen",
                                    "127.0.0.1:0", "--rank", std::to_string(r), "--token_file", dir_ + "/token"};
      if (flags_.islands > 1) {  // as each site's workers say where they are
        w.insert(w.end(), {"--island", std::to_string(r / (flags_.workers / flags_.islands))});
      }
      std::vector<std::string> worker_env = env;
      worker_env.push_back(absl::StrCat("SHARDLINE_NET_FAULT_FILE=", NetFaultFile(r)));
      procs_.push_back(std::make_unique<HostProcess>(absl::StrCat("worker ", r), net_->NetnsPath(r + 1), w,
                                                     worker_env, absl::StrCat(dir_, "/logs/worker-", r, ".log")));
    }
    for (auto& p : procs_) RETURN_IF_ERROR(p->Start());
    exit_codes_.assign(procs_.size(), std::nullopt);
    restart_at_.assign(procs_.size(), absl::InfiniteFuture());
    probe_ = std::make_unique<Probe>(net_->NetnsPath(0), dir_);
    started_ = absl::Now();
    return absl::OkStatus();
  }

  // The data-plane fault control file of worker `rank`
  // (worker/collective/faulty_transport.h).
  std::string NetFaultFile(int rank) const { return absl::StrCat(dir_, "/net_fault_", rank); }

  // Reaps and restarts. A process that exits 0 is done; one that dies is
  // started again 0.5 s later; one that exits 1 stopped with its own error,
  // which no fault here should cause: the run fails.
  void Tick() {
    for (size_t i = 0; i < procs_.size(); ++i) {
      HostProcess& p = *procs_[i];
      if (std::optional<int> code = p.Poll()) {
        if (*code == 0) {
          exit_codes_[i] = 0;
        } else if (*code == 1 || *code == 2) {
          exit_codes_[i] = *code;
          errors_.push_back(absl::StrCat(p.name(), " exited with code ", *code, " (its log: ", dir_, "/logs)"));
        } else {
          restart_at_[i] = absl::Now() + absl::Milliseconds(500);
          ++restarts_;
        }
      }
      if (!p.running() && absl::Now() >= restart_at_[i]) {
        restart_at_[i] = absl::InfiniteFuture();
        absl::Status s = p.Start();
        if (!s.ok()) errors_.push_back(std::string(s.message()));
      }
    }
  }

  bool Finished() const {
    for (const auto& c : exit_codes_) {
      if (!c.has_value()) return false;
    }
    return true;
  }
  bool CoordinatorDone() const { return exit_codes_[0].has_value(); }

  // Ticks until `pred` or `timeout`; returns whether pred held.
  bool WaitUntil(const std::function<bool()>& pred, absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    while (absl::Now() < deadline && !g_stop.load()) {
      Tick();
      if (pred()) return true;
      absl::SleepFor(absl::Milliseconds(20));
    }
    return pred();
  }
  void SleepTicking(absl::Duration d) {
    WaitUntil([] { return false; }, d);
  }

  // Puts a fault on, keeps supervising for `hold`, takes it off.
  absl::Status Hold(absl::Duration hold, const std::function<absl::Status()>& on,
                    const std::function<absl::Status()>& off) {
    absl::Status s = on();
    SleepTicking(hold);
    s.Update(off());
    return s;
  }

  FaultRecord Inject(Kind kind, std::mt19937_64& rng) {
    FaultRecord f;
    f.kind = kind;
    auto uniform = [&](double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); };
    const int worker = static_cast<int>(rng() % flags_.workers);
    // Network faults hit the coordinator's host one time in N+1.
    const int host = static_cast<int>(rng() % (flags_.workers + 1));
    f.target = host == 0 ? "coordinator" : absl::StrCat("worker ", host - 1);
    const ProbeSample before = probe_->Latest();
    const absl::Time t0 = absl::Now();
    f.at_seconds = absl::ToDoubleSeconds(t0 - started_);
    absl::Duration hold;
    absl::Status s;
    switch (kind) {
      case Kind::kKillWorker:
        f.target = absl::StrCat("worker ", worker);
        procs_[worker + 1]->Signal(SIGKILL);
        break;
      case Kind::kKillCoordinator:
        f.target = "coordinator";
        procs_[0]->Signal(SIGKILL);
        break;
      case Kind::kPauseWorker:
      case Kind::kPauseCoordinator: {
        const int i = kind == Kind::kPauseWorker ? worker + 1 : 0;
        f.target = kind == Kind::kPauseWorker ? absl::StrCat("worker ", worker) : "coordinator";
        hold = absl::Seconds(uniform(0.5, 12));
        s = Hold(
            hold,
            [&] {
              procs_[i]->Signal(SIGSTOP);
              return absl::OkStatus();
            },
            [&] {
              procs_[i]->Signal(SIGCONT);
              return absl::OkStatus();
            });
        break;
      }
      case Kind::kLinkDown:
        hold = absl::Seconds(uniform(1, 8));
        s = Hold(hold, [&] { return net_->SetPortUp(host, false); }, [&] { return net_->SetPortUp(host, true); });
        break;
      case Kind::kBlackHole:
        hold = absl::Seconds(uniform(1, 8));
        s = Hold(hold, [&] { return net_->SetAttached(host, false); }, [&] { return net_->SetAttached(host, true); });
        break;
      case Kind::kSqueeze:
        hold = absl::Seconds(uniform(2, 8));
        s = Hold(  // 8 Mbit/s
            hold, [&] { return net_->SetRateLimit(host, 8000); }, [&] { return net_->SetRateLimit(host, 0); });
        break;
      case Kind::kDiskFull: {
        // Full until a save has failed for it (the world moves on), at most 20 s.
        f.target = "checkpoints";
        s.Update(disk_->Resize(std::max<int64_t>(disk_->Used(), 4096)));
        const absl::Time full = absl::Now();
        probe_->WaitFor(
            [&](const ProbeSample& x) { return x.generation > before.generation || x.state == "forming"; },
            absl::Seconds(20));
        hold = absl::Now() - full;
        s.Update(disk_->Resize(int64_t{1} << 30));
        break;
      }
      case Kind::kDelay:
      case Kind::kLoss:
      case Kind::kReorder: {
        // Message-level faults on one worker's sends (no netem here).
        f.target = absl::StrCat("worker ", worker);
        hold = absl::Seconds(uniform(2, 6));
        const std::string what =
            kind == Kind::kDelay  ? absl::StrFormat("delay_ms=%.1f jitter_ms=5", uniform(2, 20))
            : kind == Kind::kLoss ? std::string("loss=0.002")
                                  : std::string("reorder=0.3");
        const std::string control = absl::StrCat(what, " seed=", static_cast<uint64_t>(rng() % 1000000));
        s = Hold(
            hold, [&] { return WriteFileAtomically(Env::Default(), NetFaultFile(worker), control); },
            [&] { return WriteFileAtomically(Env::Default(), NetFaultFile(worker), ""); });
        // The transport re-reads its control file every 100 ms.
        SleepTicking(absl::Milliseconds(150));
        break;
      }
      case Kind::kSlowDisk:
        f.target = "checkpoints";
        hold = absl::Seconds(uniform(2, 8));
        s = Hold(  // 500 ms per fsync
            hold, [&] { return WriteFileAtomically(Env::Default(), slow_disk_file_, "500"); },
            [&] { return WriteFileAtomically(Env::Default(), slow_disk_file_, "0"); });
        break;
    }
    if (!s.ok()) errors_.push_back(absl::StrCat(Name(kind), ": ", s.message()));
    f.held_seconds = absl::ToDoubleSeconds(hold);
    const absl::Time healed = absl::Now();

    // Recovered: a step completed after the fault, in a running world. A
    // world that broke first re-forms and restores; its first new step is
    // one past the restore point.
    int64_t furthest = before.step;
    for (const ProbeSample& x : probe_->Since(t0)) {
      if (x.generation == before.generation) furthest = std::max(furthest, x.step);
    }
    // Detected: the coordinator broke the world (forming) or is a new
    // process forming the next one.
    auto broke = [&](const ProbeSample& x) {
      return x.up && (x.generation > before.generation || x.state == "forming");
    };
    std::optional<absl::Time> detected;
    for (const ProbeSample& x : probe_->Since(t0)) {
      if (broke(x)) {
        detected = x.time;
        break;
      }
    }
    // A dead process always breaks the world; until the coordinator shows
    // it, a step that seems to advance is a report sent before the kill.
    const bool must_break = kind == Kind::kKillWorker || kind == Kind::kKillCoordinator;
    int64_t restored_from = -1;
    const absl::Time deadline = absl::Now() + kRecoveryBound;
    bool recovered = false;
    absl::Time recovered_at;
    while (!recovered && absl::Now() < deadline && !CoordinatorDone() && !g_stop.load()) {
      Tick();
      for (const ProbeSample& x : probe_->Since(healed)) {
        if (!x.up) continue;
        if (!detected.has_value() && broke(x)) detected = x.time;
        if (x.state == "done") {
          recovered = true;
          recovered_at = x.time;
          break;
        }
        if (x.generation == before.generation && !broke(x)) {
          // Still the old world. After a kill its reports in flight may
          // still raise the step: that is not recovery.
          if (must_break) {
            furthest = std::max(furthest, x.step);
          } else if (x.state == "running" && x.step > furthest) {
            recovered = true;
            recovered_at = x.time;
            break;
          }
          continue;
        }
        if (x.generation > before.generation && x.state == "running") {
          if (restored_from < 0) restored_from = x.last_checkpoint;
          if (x.step > restored_from) {
            recovered = true;
            recovered_at = x.time;
            break;
          }
        }
      }
      if (!recovered) absl::SleepFor(absl::Milliseconds(20));
    }
    if (CoordinatorDone() && !recovered) {
      recovered = exit_codes_[0] == 0;
      recovered_at = absl::Now();
    }
    f.detected = detected.has_value();
    if (detected) f.detect_seconds = absl::ToDoubleSeconds(*detected - t0);
    f.recovered = recovered;
    // From the fault's end, or from its detection when that came later (a
    // lost message is noticed only at the collective's deadline).
    if (recovered) f.recover_seconds = absl::ToDoubleSeconds(recovered_at - std::max(healed, detected.value_or(healed)));
    if (detected && restored_from >= 0) f.steps_redone = std::max<int64_t>(0, furthest - restored_from);
    if (!recovered) f.note = "no step completed within the bound after the fault";
    return f;
  }

  const std::vector<std::string>& errors() const { return errors_; }
  const std::vector<std::optional<int>>& exit_codes() const { return exit_codes_; }
  int restarts() const { return restarts_; }
  Probe* probe() { return probe_.get(); }
  absl::Time started() const { return started_; }
  void StopProbe() { probe_.reset(); }
  void KillAll() {
    for (auto& p : procs_) {
      p->Signal(SIGCONT);
      p->Kill();
    }
  }

 private:
  const Flags& flags_;
  Topology* net_;
  const std::string dir_;
  std::unique_ptr<ScopedTmpfs> disk_;
  std::string slow_disk_file_;
  std::vector<std::unique_ptr<HostProcess>> procs_;
  std::vector<std::optional<int>> exit_codes_;
  std::vector<absl::Time> restart_at_;
  std::unique_ptr<Probe> probe_;
  absl::Time started_;
  int restarts_ = 0;
  std::vector<std::string> errors_;
};

struct Summary {
  int injected = 0, recovered = 0, detected = 0;
  std::vector<double> detect, recover;
  int64_t redone = 0, redone_max = 0;
};

std::string MinMedMax(std::vector<double> v) {
  if (v.empty()) return "-";
  std::sort(v.begin(), v.end());
  return absl::StrFormat("%.2f / %.2f / %.2f", v.front(), v[v.size() / 2], v.back());
}

// The checks after the run; returns the failures.
std::vector<std::string> Check(const Flags& flags, const std::string& chaos_dir, const std::string& reference_dir,
                               const std::set<int64_t>& committed) {
  std::vector<std::string> failures;
  const absl::StatusOr<std::vector<float>> want = ReadCheckpointState(reference_dir, flags.total_steps, flags.workers);
  if (!want.ok()) failures.push_back("the reference run's final checkpoint: " + std::string(want.status().message()));
  const absl::StatusOr<std::vector<float>> got = ReadCheckpointState(chaos_dir, flags.total_steps, flags.workers);
  if (!got.ok()) failures.push_back("the chaos run's final checkpoint: " + std::string(got.status().message()));
  if (want.ok() && got.ok() && !SameBits(*got, *want)) {
    failures.push_back("the final parameters and optimizer state differ from the uninterrupted run's");
  }
  Subprocess verify({BinPath("shardline"), "ckpt", "verify", chaos_dir});
  if (verify.Wait(absl::Seconds(300)) != 0) failures.push_back("shardline ckpt verify failed: " + verify.Output());
  for (int64_t step : committed) {
    if (!Env::Default()->FileExists(StepDir(chaos_dir + "/checkpoints", step) + "/COMMITTED")) {
      failures.push_back(absl::StrCat("the committed checkpoint at step ", step, " was lost"));
    }
  }
  return failures;
}

std::set<int64_t> CommittedSteps(const std::string& coordinator_log) {
  std::set<int64_t> steps;
  std::ifstream in(coordinator_log);
  const std::string needle = "[coordinator] committed checkpoint at step ";
  for (std::string line; std::getline(in, line);) {
    const size_t at = line.find(needle);
    if (at == std::string::npos) continue;
    int64_t step = 0;
    const std::string rest = line.substr(at + needle.size());
    if (absl::SimpleAtoi(rest.substr(0, rest.find(' ')), &step)) steps.insert(step);
  }
  return steps;
}

absl::StatusOr<Flags> ParseFlags(const Args& args) {
  Flags f;
  f.workdir = args.Get("workdir");
  if (f.workdir.empty()) return absl::InvalidArgumentError("--workdir is required");
  f.seed = static_cast<uint64_t>(absl::ToUnixMicros(absl::Now()));
  if (args.Has("seed") && !absl::SimpleAtoi(args.Get("seed"), &f.seed)) {
    return absl::InvalidArgumentError("--seed must be an integer");
  }
  if (args.Has("rounds") && (!absl::SimpleAtoi(args.Get("rounds"), &f.rounds) || f.rounds < 1)) {
    return absl::InvalidArgumentError("--rounds must be a positive integer");
  }
  if (args.Has("workers") && (!absl::SimpleAtoi(args.Get("workers"), &f.workers) || f.workers < 1 || f.workers > 8)) {
    return absl::InvalidArgumentError("--workers must be in [1, 8]");
  }
  if (args.Has("islands") && (!absl::SimpleAtoi(args.Get("islands"), &f.islands) || f.islands < 1 ||
                              f.workers % f.islands != 0)) {
    return absl::InvalidArgumentError(absl::StrCat("--islands must be a positive integer dividing --workers (",
                                                   f.workers, ")"));
  }
  if (args.Has("total_steps") && (!absl::SimpleAtoi(args.Get("total_steps"), &f.total_steps) || f.total_steps < 1)) {
    return absl::InvalidArgumentError("--total_steps must be a positive integer");
  }
  f.report = args.Get("report");
  if (args.Has("kinds")) {
    for (absl::string_view k : absl::StrSplit(args.Get("kinds"), ',')) {
      bool found = false;
      for (const auto& [kind, name] : KindNames()) {
        if (name == k) {
          f.kinds.push_back(kind);
          found = true;
        }
      }
      if (!found) return absl::InvalidArgumentError(absl::StrCat("--kinds: unknown fault kind '", k, "'"));
    }
  } else {
    for (const auto& [kind, name] : KindNames()) f.kinds.push_back(kind);
  }
  return f;
}

int Main(const Args& args) {
  absl::StatusOr<Flags> parsed = ParseFlags(args);
  if (!parsed.ok()) {
    std::fprintf(stderr, "shardline_chaos: %s\n", std::string(parsed.status().message()).c_str());
    return 1;
  }
  const Flags flags = *parsed;
  if (geteuid() != 0 || access("/usr/sbin/ip", X_OK) != 0) {
    std::printf("SKIPPED: the chaos harness needs root and iproute2 to create network namespaces\n");
    return kSkip;
  }
  RemoveStaleNamespaces();
  std::printf("chaos: seed %llu, %d worker(s) in %d island(s), %lld steps, %d round(s) of %zu kind(s)\n",
              static_cast<unsigned long long>(flags.seed), flags.workers, flags.islands,
              static_cast<long long>(flags.total_steps),
              flags.rounds, flags.kinds.size());
  std::fflush(stdout);
  // A harness killed outright (SIGKILL) leaves its checkpoint tmpfs mounted.
  umount2((flags.workdir + "/chaos/checkpoints").c_str(), MNT_DETACH);
  RunCommand({"/usr/bin/rm", "-rf", flags.workdir}).IgnoreError();
  if (absl::Status s = Env::Default()->CreateDirs(flags.workdir); !s.ok()) {
    std::fprintf(stderr, "shardline_chaos: %s\n", std::string(s.message()).c_str());
    return 1;
  }

  // The uninterrupted run, on loopback.
  const std::string reference_dir = flags.workdir + "/reference";
  {
    std::vector<std::string> argv = {BinPath("shardline"), "launch", "--config", DefaultConfig(), "--workers",
                                     std::to_string(flags.workers), "--workdir", reference_dir};
    for (const std::string& s : JobSets(flags)) {
      argv.push_back("--set");
      argv.push_back(s);
    }
    const absl::Time t = absl::Now();
    Subprocess reference(argv);
    int code = -2;
    while ((code = reference.Poll()) == -2 && !g_stop.load() && absl::Now() - t < absl::Seconds(3600)) {
      absl::SleepFor(absl::Milliseconds(100));
    }
    if (code == -2) code = reference.Wait(absl::ZeroDuration());  // stopped or over an hour: killed
    if (code != 0) {
      std::fprintf(stderr, "shardline_chaos: the reference run failed (%d):\n%s\n", code, reference.Output().c_str());
      return 1;
    }
    std::printf("chaos: reference run: %.1f s\n", absl::ToDoubleSeconds(absl::Now() - t));
    std::fflush(stdout);
  }

  const std::string prefix = absl::StrCat("slc", getpid() % 100000);
  absl::StatusOr<std::unique_ptr<Topology>> net = Topology::Create(prefix, flags.workers + 1);
  if (!net.ok()) {
    std::printf("SKIPPED: cannot create the simulated hosts: %s\n", std::string(net.status().message()).c_str());
    return kSkip;
  }
  const std::string chaos_dir = flags.workdir + "/chaos";
  ChaosRun run(flags, net->get(), chaos_dir);
  if (absl::Status s = run.Start(); !s.ok()) {
    std::fprintf(stderr, "shardline_chaos: %s\n", std::string(s.message()).c_str());
    run.KillAll();
    return 1;
  }

  std::mt19937_64 rng(flags.seed);
  std::vector<Kind> schedule;
  for (int r = 0; r < flags.rounds; ++r) schedule.insert(schedule.end(), flags.kinds.begin(), flags.kinds.end());
  std::shuffle(schedule.begin(), schedule.end(), rng);

  std::vector<FaultRecord> faults;
  std::vector<std::string> failures;
  // The world must be running before the first fault.
  if (!run.WaitUntil([&] { return run.probe()->Latest().state == "running"; }, absl::Seconds(120))) {
    failures.push_back("the job did not start running within 120 s");
  }
  std::ofstream jsonl(chaos_dir + "/faults.jsonl");
  for (Kind kind : failures.empty() ? schedule : std::vector<Kind>{}) {
    if (g_stop.load()) {
      failures.push_back("stopped by a signal");
      break;
    }
    run.SleepTicking(absl::Seconds(std::uniform_real_distribution<double>(0.5, 2.5)(rng)));
    if (run.CoordinatorDone() || run.probe()->Latest().step >= flags.total_steps) break;
    FaultRecord f = run.Inject(kind, rng);
    jsonl << Json(f) << "\n";
    jsonl.flush();
    std::printf("chaos: %-17s %-13s at %6.1f s held %5.2f s: %s detect %5.2f s, recover %5.2f s, %lld steps redone\n",
                Name(f.kind).c_str(), f.target.c_str(), f.at_seconds, f.held_seconds,
                f.detected ? "world re-formed," : "absorbed,", f.detect_seconds, f.recover_seconds,
                static_cast<long long>(f.steps_redone));
    std::fflush(stdout);
    faults.push_back(f);
    if (!f.recovered) {
      failures.push_back(absl::StrCat(Name(kind), " at ", f.at_seconds, " s: not recovered within ",
                                      absl::FormatDuration(kRecoveryBound)));
      break;
    }
  }
  if (faults.size() < schedule.size() && failures.empty()) {
    failures.push_back(absl::StrCat("the job ended after ", faults.size(), " of ", schedule.size(),
                                    " faults; raise --total_steps"));
  }
  if (failures.empty() && !run.WaitUntil([&] { return run.Finished(); }, absl::Seconds(600))) {
    failures.push_back("the job did not finish within 600 s of the last fault");
  }
  const double elapsed = absl::ToDoubleSeconds(absl::Now() - run.started());
  run.StopProbe();
  run.KillAll();
  for (size_t i = 0; i < run.exit_codes().size(); ++i) {
    if (run.exit_codes()[i].has_value() && *run.exit_codes()[i] != 0) {
      failures.push_back(absl::StrCat(i == 0 ? "the coordinator" : absl::StrCat("worker ", i - 1), " exited with ",
                                      *run.exit_codes()[i]));
    }
  }
  for (const std::string& e : run.errors()) failures.push_back(e);
  const std::set<int64_t> committed = CommittedSteps(chaos_dir + "/logs/coordinator.log");
  if (failures.empty()) {
    for (const std::string& f : Check(flags, chaos_dir, reference_dir, committed)) failures.push_back(f);
  }

  // The table: per kind, then all.
  std::map<std::string, Summary> by_kind;
  Summary all;
  for (const FaultRecord& f : faults) {
    for (Summary* s : {&by_kind[Name(f.kind)], &all}) {
      ++s->injected;
      if (f.recovered) ++s->recovered;
      if (f.detected) {
        ++s->detected;
        s->detect.push_back(f.detect_seconds);
      }
      if (f.recovered) s->recover.push_back(f.recover_seconds);
      s->redone += f.steps_redone;
      s->redone_max = std::max(s->redone_max, f.steps_redone);
    }
  }
  const bool same = failures.empty();
  std::ostringstream table;
  table << "seed " << flags.seed << ", " << flags.workers << " workers, " << flags.total_steps << " steps, "
        << faults.size() << " faults in " << absl::StrFormat("%.0f", elapsed) << " s, " << committed.size()
        << " checkpoints committed\n\n";
  table << "| fault | injected | recovered | world re-formed | detect s (min / med / max) | recover s (min / med / "
           "max) | steps redone (total / max) |\n|---|---|---|---|---|---|---|\n";
  auto row = [&](const std::string& name, const Summary& s) {
    table << "| " << name << " | " << s.injected << " | " << s.recovered << " | " << s.detected << " | "
          << MinMedMax(s.detect) << " | " << MinMedMax(s.recover) << " | " << s.redone << " / " << s.redone_max
          << " |\n";
  };
  for (const auto& [name, s] : by_kind) row(name, s);
  row("**all**", all);
  table << "\nfinished: " << (run.exit_codes()[0] == 0 ? "yes" : "no")
        << "; final state equals the uninterrupted run's: " << (same ? "yes" : "no (see failures)")
        << "; committed checkpoints lost: "
        << std::count_if(failures.begin(), failures.end(),
                         [](const std::string& f) { return f.find(" was lost") != std::string::npos; })
        << "\n";
  std::printf("\n%s", table.str().c_str());
  if (!flags.report.empty()) {
    std::ofstream(flags.report) << table.str();
  }
  for (const std::string& f : failures) std::printf("FAILED: %s\n", f.c_str());
  std::printf("%s\n", failures.empty() ? "PASSED" : "FAILED");
  return failures.empty() ? 0 : 1;
}

}  // namespace
}  // namespace shardline

int main(int argc, char** argv) {
  shardline::Args args;
  absl::Status parsed = shardline::ParseArgs(argc, argv, 1,
                                             {{"workdir", "seed", "rounds", "kinds", "workers", "islands", "total_steps", "report"}, {}}, "shardline_chaos", &args);
  if (!parsed.ok()) {
    std::fprintf(stderr, "shardline_chaos: %s\n", std::string(parsed.message()).c_str());
    return 1;
  }
  signal(SIGINT, shardline::OnStop);
  signal(SIGTERM, shardline::OnStop);
  return shardline::Main(args);
}
