// Stragglers: each rank's busy time per step (its own work, not waiting on
// peers - WorkerReport.busy_seconds_per_step) against the fastest rank's, as
// a score in (0, 1]: 1 for the fastest, 0.5 for a rank that needs twice as
// long. In synchronous data parallelism every rank's step takes as long as
// the slowest rank's work, so the others' wait is the straggler's cost.
//
//   coordinator::JobStatus s = job.Snapshot();   // scores already set
//   StragglerWatch watch({.threshold = 0.7});
//   for (const StragglerChange& c : watch.Observe(s, WallNow())) log(c);
#ifndef SHARDLINE_COORDINATOR_DECIDE_STRAGGLER_H_
#define SHARDLINE_COORDINATOR_DECIDE_STRAGGLER_H_

#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "google/protobuf/repeated_field.h"
#include "proto/coordinator.pb.h"

namespace shardline {

// Sets straggler_score of every worker: min busy / its busy over the workers
// that reported a busy time; 0 for those that did not.
void ScoreStragglers(google::protobuf::RepeatedPtrField<coordinator::WorkerStatus>* workers);

struct StragglerOptions {
  // A rank whose score stays below this is logged as a straggler.
  double threshold = 0.7;
  // ... for at least this long (scores move with a 20-step average; a
  // single slow step is not a straggler).
  absl::Duration sustain = absl::Seconds(10);
};

// A rank that became a straggler, or stopped being one, and the line that
// says so (the caller logs it: WARNING when `straggler`, INFO when not).
struct StragglerChange {
  int rank = 0;
  bool straggler = false;
  std::string line;
};

// Flags a rank once its score has stayed below the threshold for `sustain`,
// and unflags it once it is back above; Observe returns those changes only,
// in rank order. Pure (no clock, no log). Not thread-safe.
class StragglerWatch {
 public:
  explicit StragglerWatch(StragglerOptions options) : options_(options) {}
  std::vector<StragglerChange> Observe(const coordinator::JobStatus& status, absl::Time now);
  // Ranks flagged as stragglers and not yet back above the threshold.
  int flagged() const;

 private:
  struct Track {
    absl::Time below_since = absl::InfiniteFuture();
    bool flagged = false;
  };
  const StragglerOptions options_;
  uint64_t generation_ = 0;
  std::map<int, Track> ranks_;
};

}  // namespace shardline

#endif  // SHARDLINE_COORDINATOR_DECIDE_STRAGGLER_H_
