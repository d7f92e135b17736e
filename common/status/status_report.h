// `shardline status`: the job at a glance, as text, from the coordinator's
// typed status (the Status RPC).
//
//   std::fputs(StatusReport(status, WallNow()).c_str(), stdout);
//
//   job 7f3e0c1a2b  running  generation 2  step 1200/18720 (6.4%)  ETA 0:31
//   loss 0.4213 at step 1200, 9120 samples/s; best eval: accuracy 0.8812 at step 1000
//   last committed checkpoint: step 1000, 12 s ago
//   goodput 93.1% (...); lost: startup 3.2 s; 1 disruption
//   rank  host:port        alive  heartbeat  step   own work/step  straggler
//      0  127.0.0.1:41234  yes       0.05 s  1201          1.2 ms       1.00
#ifndef SHARDLINE_COMMON_STATUS_STATUS_REPORT_H_
#define SHARDLINE_COMMON_STATUS_STATUS_REPORT_H_

#include <string>

#include "absl/time/time.h"
#include "proto/coordinator.pb.h"

namespace shardline {

// "0:31", "2:05:09"; "-" for a negative (unknown) duration.
std::string FormatEta(double seconds);

// Seconds from the last commit to `now`.
double CheckpointAgeSeconds(const coordinator::JobStatus& status, absl::Time now);

// Lines ending in '\n'. `now` dates the checkpoint's age.
std::string StatusReport(const coordinator::JobStatus& status, absl::Time now);

// Islands: "islands: 2; 12 outer steps, the last at step 240: islands
// 0.0123 apart (pseudo-gradient RMS norm), 0.15 s (1.8 s in all), 123456
// bytes sent across islands by rank 0". The status page shows it too.
std::string OuterStepLine(const coordinator::OuterStepStatus& outer);

// The job's numerics fingerprint and kernels and, under runtime.numerics
// RELAXED, each other one admitted and the step from which the bits are not
// comparable; "" before a worker reported one.
std::string NumericsLine(const coordinator::JobStatus& status);

}  // namespace shardline

#endif  // SHARDLINE_COMMON_STATUS_STATUS_REPORT_H_
