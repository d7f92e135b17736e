// When the workers stop, evaluate or save on request: the coordinator names
// a step ahead of every worker, and each worker acts when it completes that
// step (the workers' per-step agreement makes it exact). Pure: the caller
// passes what the heartbeats reported.
#ifndef SHARDLINE_COORDINATOR_DECIDE_SCHEDULE_H_
#define SHARDLINE_COORDINATOR_DECIDE_SCHEDULE_H_

#include <cstdint>

#include "absl/time/time.h"

namespace shardline {

// A step no worker has completed yet: the furthest step reported plus half
// a second of steps at `steps_per_second` (at least 2: heartbeats lag by
// up to ~100 ms), capped at `total_steps` (if > 0).
int64_t StepAhead(int64_t furthest_done, double steps_per_second, int64_t total_steps);

// checkpoint.every_seconds: true when `period_seconds` (> 0) has passed
// since the last save (or since the request that scheduled one).
bool PeriodicSaveDue(absl::Time now, absl::Time last_save, double period_seconds);

}  // namespace shardline

#endif  // SHARDLINE_COORDINATOR_DECIDE_SCHEDULE_H_
