// Watches a step counter from a thread of its own and calls out when it
// stops moving: once after `timeout` without progress (the worker reports
// itself stuck, so the coordinator treats it as lost), and once more after
// twice that (the worker exits so a supervisor can restart it). Time is read
// from the Env, so tests drive it with a fake clock.
//
//   WatchdogOptions o;
//   o.timeout = absl::Seconds(cfg.runtime().watchdog_timeout_seconds());
//   o.on_stuck = [&](const std::string& what) { heartbeat.ReportStuck(what); };
//   o.on_still_stuck = [] { _exit(3); };
//   Watchdog watchdog(heartbeat.steps_done(), o);
//   ... RunTraining ...            // the destructor stops the thread
#ifndef SHARDLINE_WORKER_LIFECYCLE_WATCHDOG_H_
#define SHARDLINE_WORKER_LIFECYCLE_WATCHDOG_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>

#include "absl/time/time.h"
#include "common/platform/env.h"

namespace shardline {

struct WatchdogOptions {
  // No progress for this long counts as stuck. Must be positive.
  absl::Duration timeout = absl::Seconds(300);
  // How often the counter is read; the verdicts come at most this late.
  absl::Duration poll = absl::Milliseconds(100);
  // Named in the message given to on_stuck.
  int rank = 0;
  // Called once, on the watchdog's thread, when the counter has not moved
  // for `timeout`; `what` names the rank, the step and how long.
  std::function<void(const std::string& what)> on_stuck;
  // Called once, `timeout` after on_stuck, if the counter still has not
  // moved. The watchdog stops watching after it returns.
  std::function<void()> on_still_stuck;
  Env* env = nullptr;  // required: its clock
};

class Watchdog {
 public:
  // `steps` must outlive the watchdog.
  Watchdog(const std::atomic<int64_t>* steps, WatchdogOptions options);
  // Stops the thread (within one poll); no callback runs after it returns.
  ~Watchdog();

 private:
  void Run();

  const std::atomic<int64_t>* steps_;
  const WatchdogOptions options_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace shardline

#endif  // SHARDLINE_WORKER_LIFECYCLE_WATCHDOG_H_
