// The worker's StepObserver for one generation: feeds the Prometheus metrics
// (and the transport byte counters with them), tells the heartbeat where the
// process's time goes (goodput and straggler accounting), writes traced
// steps' phases, and logs the generation's first step, which
// bench/drivers/recovery_bench.sh measures restarts by.
#ifndef SHARDLINE_WORKER_LIFECYCLE_GENERATION_OBSERVER_H_
#define SHARDLINE_WORKER_LIFECYCLE_GENERATION_OBSERVER_H_

#include "proto/coordinator.pb.h"
#include "worker/collective/ring.h"
#include "worker/control/heartbeat.h"
#include "worker/trace/trace_writer.h"
#include "worker/train/train_loop.h"
#include "worker/lifecycle/worker_metrics.h"

namespace shardline {

class GenerationObserver : public StepObserver {
 public:
  // `metrics` and `traces` may be null (no Prometheus; no traced steps);
  // everything given must outlive the observer.
  GenerationObserver(WorkerMetrics* metrics, const RingCollectives* ring, Heartbeat* heartbeat,
                     TraceWriter* traces)
      : metrics_(metrics), ring_(ring), heartbeat_(heartbeat), traces_(traces) {}
  void OnStart(const RunInfo& info) override;
  void OnStep(const StepResult& result, double seconds) override;
  void OnOverhead(Overhead kind, double seconds) override;
  void OnTrace(int64_t step, const std::vector<PhaseSpan>& spans) override;
  void OnOuterStep(const OuterStepReport& report) override;

  // Weight of the newest step in the busy-time average: about the last 20
  // steps count.
  static constexpr double kBusySmoothing = 0.05;

 private:
  WorkerMetrics* metrics_;
  const RingCollectives* ring_;
  Heartbeat* heartbeat_;
  TraceWriter* traces_;
  bool first_ = true;
  coordinator::TimeAccount time_;
  coordinator::OuterStepStatus outer_;  // islands: this generation's outer steps
  double busy_per_step_ = 0;  // exponential moving average
};

}  // namespace shardline

#endif  // SHARDLINE_WORKER_LIFECYCLE_GENERATION_OBSERVER_H_
