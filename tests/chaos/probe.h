// The harness's view of the job: a thread that enters the coordinator's
// network namespace and reads the coordinator's /metrics every 50 ms
// (generation, global step, state, last committed checkpoint), following
// the coordinator across restarts through <workdir>/coordinator.metrics_address.
#ifndef SHARDLINE_TESTS_CHAOS_PROBE_H_
#define SHARDLINE_TESTS_CHAOS_PROBE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "common/platform/mutex.h"

namespace shardline {

struct ProbeSample {
  absl::Time time;
  bool up = false;  // false: the coordinator did not answer (the rest is stale)
  int64_t generation = 0;
  int64_t step = 0;  // the global step: the slowest worker's steps done
  int64_t last_checkpoint = 0;
  std::string state;  // forming, running, stopping, done, failed
};

class Probe {
 public:
  Probe(std::string netns_path, std::string workdir);
  ~Probe();

  ProbeSample Latest();
  // Every sample taken since `since`.
  std::vector<ProbeSample> Since(absl::Time since);
  // Waits up to `timeout` for a sample (taken from now on) that satisfies
  // `pred`; returns it, or nullopt-like {time = InfinitePast} on timeout.
  ProbeSample WaitFor(const std::function<bool(const ProbeSample&)>& pred, absl::Duration timeout);

 private:
  void Run();
  ProbeSample Take();

  const std::string netns_path_, workdir_;
  std::atomic<bool> stop_{false};
  Mutex mu_;
  std::vector<ProbeSample> samples_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace shardline

#endif  // SHARDLINE_TESTS_CHAOS_PROBE_H_
