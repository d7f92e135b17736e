// The one-line human view of a job's status, shared by the coordinator's log
// and `shardline launch`'s live status line (which gets the status from the
// Status RPC).
//
//   SLOG(INFO) << ProgressLine(job.Snapshot());
//   // progress: step 1200/18720 | loss 0.4213 | 9120 samples/s | ETA 0:31 | workers 2/2 alive | generation 1 | running
#ifndef SHARDLINE_COMMON_STATUS_PROGRESS_LINE_H_
#define SHARDLINE_COMMON_STATUS_PROGRESS_LINE_H_

#include <string>

#include "proto/coordinator.pb.h"

namespace shardline {

// "running", "forming", ...: the state as the progress line and the
// Prometheus label spell it.
std::string StateName(coordinator::JobStatus::State state);

// Fields not yet known (no train record, no rate) print as "-".
std::string ProgressLine(const coordinator::JobStatus& status);

}  // namespace shardline

#endif  // SHARDLINE_COMMON_STATUS_PROGRESS_LINE_H_
