// What the coordinator shows about its job, all advanced from one snapshot
// of the Job every tick: the goodput account, the straggler watch, the
// coordinator's trace track (train.trace_steps), the Prometheus gauges and
// the progress line in its log.
//
//   StatusViews views(&job, goodput.get(), &metrics, std::move(trace), options);
//   every 100 ms: views.Tick(WallNow());
//   Status RPC and /status: views.Status();
//   at the end: views.Final(WallNow());
//
// The views are diagnostics: a view that cannot write (the goodput record,
// the trace file) logs a warning and training goes on.
#ifndef SHARDLINE_COORDINATOR_STATUS_VIEWS_H_
#define SHARDLINE_COORDINATOR_STATUS_VIEWS_H_

#include <memory>

#include "absl/time/time.h"
#include "coordinator/coordinator_metrics.h"
#include "coordinator/goodput.h"
#include "coordinator/job.h"
#include "coordinator/decide/straggler.h"
#include "coordinator/trace_log.h"
#include "proto/coordinator.pb.h"

namespace shardline {

struct StatusViewsOptions {
  // A progress line in the log this often; 0: never (shardline launch on a
  // terminal draws its own).
  double progress_every_seconds = 1;
  StragglerOptions stragglers;
};

class StatusViews {
 public:
  // Borrows job, goodput and metrics, which must outlive it; `trace` may be
  // null (no train.trace_steps).
  StatusViews(Job* job, GoodputLedger* goodput, CoordinatorMetrics* metrics, std::unique_ptr<TraceLog> trace,
              StatusViewsOptions options);

  // The job's status with its goodput account, as the Status RPC, /status
  // and /metrics show it. Thread-safe.
  coordinator::JobStatus Status() const;

  // One tick of the coordinator's loop. Called from one thread.
  void Tick(absl::Time now);

  // The last tick: the goodput account persisted, the final progress and
  // goodput lines logged.
  void Final(absl::Time now);

 private:
  // One snapshot of the job, which the goodput account advances on before
  // its own snapshot is attached.
  coordinator::JobStatus Advance(absl::Time now);
  void Trace(const coordinator::JobStatus& s, absl::Time now);

  Job* const job_;
  GoodputLedger* const goodput_;
  CoordinatorMetrics* const metrics_;
  std::unique_ptr<TraceLog> trace_;
  const StatusViewsOptions options_;
  StragglerWatch stragglers_;
  absl::Time last_progress_ = absl::InfinitePast();
};

}  // namespace shardline

#endif  // SHARDLINE_COORDINATOR_STATUS_VIEWS_H_
