#include "worker/launch/supervisor.h"

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/job/shard.h"

namespace shardline {
namespace {

// After every worker finished, the coordinator has this long to end on its
// own, then SIGTERM, then SIGKILL kCoordinatorKillAfter later.
constexpr absl::Duration kCoordinatorAfterWorkers = absl::Seconds(10);
constexpr absl::Duration kCoordinatorKillAfter = absl::Seconds(5);
// Workers finish on their own once the coordinator has ended.
constexpr absl::Duration kWorkersAfterCleanEnd = absl::Seconds(30);
constexpr absl::Duration kWorkersAfterFailedEnd = absl::Seconds(5);
// A failed job's graceful stop.
constexpr absl::Duration kFailedJobGrace = absl::Seconds(30);

}  // namespace

ChildExit ExitOf(int wait_status) {
  ChildExit e;
  e.ok = WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0;
  e.own_error = WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 1;
  e.signaled = WIFSIGNALED(wait_status);
  e.how = WIFEXITED(wait_status) ? absl::StrCat("exit code ", WEXITSTATUS(wait_status))
                                 : absl::StrCat("signal ", WTERMSIG(wait_status));
  return e;
}

Supervisor::Supervisor(SupervisorOptions options)
    : options_(std::move(options)),
      finished_(static_cast<size_t>(options_.workers), false),
      gone_(static_cast<size_t>(options_.workers), false) {}

bool Supervisor::GoesOnWithout(int rank, std::string* with) const {
  const int left = options_.workers - (workers_gone_ + 1);
  if (options_.min_islands <= 0) {
    *with = absl::StrCat(left, " workers (runtime.min_workers=", options_.min_workers, ")");
    return options_.min_workers > 0 && left >= options_.min_workers;
  }
  const int islands = std::max(options_.islands, 1);
  std::vector<bool> lost(static_cast<size_t>(islands), false);
  for (int r = 0; r < options_.workers; ++r) {
    if (r == rank || gone_[static_cast<size_t>(r)]) lost[static_cast<size_t>(IslandOfRank(r, options_.workers, islands))] = true;
  }
  const int whole = static_cast<int>(std::count(lost.begin(), lost.end(), false));
  *with = absl::StrCat(whole, " of ", islands, " islands (runtime.min_islands=", options_.min_islands, ")");
  return whole >= options_.min_islands;
}

void Supervisor::Fail(absl::Status why) {
  if (outcome_.ok()) outcome_ = std::move(why);
}

Actions Supervisor::OnSignal() {
  Actions a;
  if (signals_++ == 0) {
    a.infos.push_back("stopping the job gracefully (again to kill it)");
    a.signal_coordinator = SIGTERM;
  } else {
    a.signal_coordinator = SIGKILL;
    a.signal_workers = SIGKILL;
    outcome_ = absl::AbortedError("killed by a second signal");
  }
  return a;
}

Actions Supervisor::OnCoordinatorExit(const ChildExit& e, absl::Time now) {
  Actions a;
  if (e.signaled && outcome_.ok() && !workers_finished() &&
      coordinator_restarts_ < options_.max_coordinator_restarts) {
    // It recovers its state from RocksDB; the workers reconnect (or, if they
    // all finished meanwhile, it finds the job over). Lost during a graceful
    // stop, it is told so: its first world stops.
    ++coordinator_restarts_;
    a.warnings.push_back(absl::StrCat("the coordinator died (", e.how, "); restarting it (", coordinator_restarts_,
                                      "/", options_.max_coordinator_restarts, ")",
                                      signals_ > 0 ? "; it goes on with the graceful stop" : ""));
    a.restart_coordinator = true;
    a.coordinator_stop_requested = signals_ > 0;
    return a;
  }
  coordinator_done_ = true;
  coordinator_exit_ = now;
  if (workers_finished() && !e.ok) {
    a.warnings.push_back(
        absl::StrCat("the coordinator ended with ", e.how, " after every worker finished; the job is done"));
  } else if (!e.ok) {
    Fail(absl::InternalError(absl::StrCat(
        "the coordinator failed (", e.how, ")",
        e.signaled && coordinator_restarts_ >= options_.max_coordinator_restarts ? "; no coordinator restarts left"
                                                                                : "")));
  }
  // The job is over and nobody will coordinate the workers again: stop them
  // now rather than after the grace period.
  if (!e.ok && !workers_finished()) a.signal_workers = SIGTERM;
  return a;
}

Actions Supervisor::OnWorkerExit(int rank, const ChildExit& e, absl::Time now) {
  Actions a;
  const std::string name = absl::StrCat("worker ", rank);
  if (e.ok) {
    finished_[static_cast<size_t>(rank)] = true;
    const int done = static_cast<int>(std::count(finished_.begin(), finished_.end(), true));
    if (done + workers_gone_ == options_.workers && !workers_finished()) workers_finished_at_ = now;
    return a;
  }
  if (killed_after_end_ && outcome_.ok()) {
    // The final checkpoint is committed and the coordinator said so: a
    // worker that would not exit afterwards does not undo that.
    a.warnings.push_back(
        absl::StrCat(name, " did not exit within 30 s of the job's end and was killed; the job is done"));
    return a;
  }
  // During a graceful stop too: the world it rejoins stops after one step
  // and saves (a second signal fails the job).
  const bool may_go_on = !e.own_error && !coordinator_done_ && outcome_.ok();
  if (may_go_on && restarts_ < options_.max_restarts) {
    ++restarts_;
    a.warnings.push_back(
        absl::StrCat(name, " died (", e.how, "); restarting it (", restarts_, "/", options_.max_restarts, ")"));
    a.restart_workers.push_back(rank);
  } else if (std::string with; may_go_on && GoesOnWithout(rank, &with)) {
    ++workers_gone_;
    gone_[static_cast<size_t>(rank)] = true;
    a.warnings.push_back(absl::StrCat(name, " died (", e.how, "); no restarts left; the job goes on with ", with));
  } else if (outcome_.ok()) {
    Fail(e.own_error ? absl::FailedPreconditionError(absl::StrCat(
                           name, " stopped with an error (exit code 1; its last lines above and ", options_.workdir,
                           "/logs/ say which); not restarting it: the same error would recur"))
                     : absl::InternalError(absl::StrCat(name, " failed (", e.how, ")",
                                                        restarts_ >= options_.max_restarts ? "; no restarts left"
                                                                                           : "")));
    a.signal_coordinator = SIGTERM;
  }
  return a;
}

Actions Supervisor::OnTick(bool coordinator_running, bool workers_running, absl::Time now) {
  Actions a;
  const absl::Duration grace = outcome_.ok() ? kWorkersAfterCleanEnd : kWorkersAfterFailedEnd;
  if (coordinator_done_ && now - coordinator_exit_ > grace && workers_running) {
    a.signal_workers = SIGKILL;
    killed_after_end_ = killed_after_end_ || outcome_.ok();
  }
  if (workers_finished() && coordinator_running) {
    const absl::Duration since = now - workers_finished_at_;
    if (since > kCoordinatorAfterWorkers + kCoordinatorKillAfter) {
      a.signal_coordinator = SIGKILL;
    } else if (since > kCoordinatorAfterWorkers && !coordinator_termed_) {
      a.warnings.push_back(absl::StrCat("every worker finished ", absl::FormatDuration(since),
                                        " ago and the coordinator is still running; stopping it"));
      a.signal_coordinator = SIGTERM;
      coordinator_termed_ = true;
    }
  }
  if (!outcome_.ok() && failed_at_ == absl::InfinitePast()) failed_at_ = now;
  if (!outcome_.ok() && now - failed_at_ > kFailedJobGrace) {
    a.signal_coordinator = SIGKILL;
    a.signal_workers = SIGKILL;
  }
  return a;
}

}  // namespace shardline
