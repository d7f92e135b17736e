// What `shardline launch` decides about its children, as a pure function of
// what happened and when: no processes, signals, clocks or logging here.
// The launcher (worker/cli/launch_command.cc) feeds it each child's exit,
// each Ctrl-C / SIGTERM and a tick every 20 ms, and carries out the Actions
// it gets back.
//
//   Supervisor s(options);
//   Actions a = s.OnWorkerExit(/*rank=*/1, ExitOf(wait_status), now);
//   for (int r : a.restart_workers) children[r]->Start();
//   if (s.done()) return s.outcome();
//
// The rules (docs/operations.md, "Failure modes"; docs/architecture.md):
//  - A worker that exits 0 has finished; when every worker that is still
//    counted has, the job is over whatever the coordinator does next.
//  - A worker that dies (a signal, or any exit code but 0 and 1) is
//    restarted with the same rank while the job's worker budget lasts and
//    the coordinator runs; with runtime.min_workers set and no budget left,
//    the job goes on without it while enough remain. Exit code 1 is the
//    process's own error (bad config, bad data): a restart would meet it
//    again, so the job fails naming the worker.
//  - A coordinator killed by a signal is restarted (it recovers from
//    RocksDB) within its own budget; during a graceful stop it is told so.
//  - The first signal asks the coordinator to stop gracefully; the second
//    kills everything.
//  - Nothing waits without an end: workers get 30 s after a clean end of
//    the coordinator (5 s after a failed one), a coordinator 10 s after
//    every worker finished (then SIGTERM, and SIGKILL 5 s later), and a
//    failed job 30 s before everything is killed.
#ifndef SHARDLINE_WORKER_LAUNCH_SUPERVISOR_H_
#define SHARDLINE_WORKER_LAUNCH_SUPERVISOR_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace shardline {

struct SupervisorOptions {
  int workers = 1;
  // Restarts of dead workers allowed over the whole job (--max_restarts).
  int max_restarts = 0;
  // Restarts of a coordinator killed by a signal (--max_coordinator_restarts).
  int max_coordinator_restarts = 0;
  // runtime.min_workers: > 0 makes the job elastic (goes on without a worker
  // that cannot be restarted while at least this many remain).
  int min_workers = 0;
  // runtime.min_islands of collective.islands: > 0 makes the job elastic by
  // whole islands (goes on while at least this many islands have lost no
  // worker it cannot restart).
  int islands = 1;
  int min_islands = 0;
  // For messages: where the children's logs are.
  std::string workdir;
};

// How a child ended, from its wait status.
struct ChildExit {
  bool ok = false;            // exit code 0
  bool own_error = false;     // exit code 1: a restart would meet it again
  bool signaled = false;      // killed by a signal
  std::string how;            // "exit code 3", "signal 9"
};
ChildExit ExitOf(int wait_status);

// What the launcher does next. Signals go only to children still running.
struct Actions {
  bool restart_coordinator = false;
  bool coordinator_stop_requested = false;  // add --stop_requested to its restart
  std::vector<int> restart_workers;
  int signal_coordinator = 0;  // 0, SIGTERM or SIGKILL
  int signal_workers = 0;      // 0, SIGTERM or SIGKILL, to every running worker
  std::vector<std::string> warnings;  // for the launcher's log
  std::vector<std::string> infos;
};

class Supervisor {
 public:
  explicit Supervisor(SupervisorOptions options);

  // A Ctrl-C or SIGTERM reached the launcher.
  Actions OnSignal();
  Actions OnCoordinatorExit(const ChildExit& e, absl::Time now);
  Actions OnWorkerExit(int rank, const ChildExit& e, absl::Time now);
  // Nothing exited: the timers. `workers_running` / `coordinator_running`:
  // whether any such child is still running.
  Actions OnTick(bool coordinator_running, bool workers_running, absl::Time now);

  // OK while the job may still succeed; then why it failed.
  const absl::Status& outcome() const { return outcome_; }
  int workers_gone() const { return workers_gone_; }

 private:
  bool workers_finished() const { return workers_finished_at_ != absl::InfinitePast(); }
  // Whether the job may go on without `rank` as well as those gone, and
  // what it goes on with (for the message).
  bool GoesOnWithout(int rank, std::string* with) const;
  void Fail(absl::Status why);

  const SupervisorOptions options_;
  absl::Status outcome_;
  int signals_ = 0;
  int restarts_ = 0;
  int coordinator_restarts_ = 0;
  int workers_gone_ = 0;
  std::vector<bool> finished_;
  std::vector<bool> gone_;  // by rank: died with no restarts left, the job going on
  absl::Time workers_finished_at_ = absl::InfinitePast();
  bool coordinator_done_ = false;
  absl::Time coordinator_exit_;
  bool coordinator_termed_ = false;
  bool killed_after_end_ = false;
  absl::Time failed_at_ = absl::InfinitePast();
};

}  // namespace shardline

#endif  // SHARDLINE_WORKER_LAUNCH_SUPERVISOR_H_
