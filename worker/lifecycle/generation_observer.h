// The worker's StepObserver for one generation: feeds the Prometheus metrics
// (and the transport byte counters with them) and logs the generation's
// first step, which bench/recovery_bench.sh measures restarts by.
#ifndef SHARDLINE_WORKER_LIFECYCLE_GENERATION_OBSERVER_H_
#define SHARDLINE_WORKER_LIFECYCLE_GENERATION_OBSERVER_H_

#include "worker/collective/ring.h"
#include "worker/train/train_loop.h"
#include "worker/worker_metrics.h"

namespace shardline {

class GenerationObserver : public StepObserver {
 public:
  // `metrics` may be null (no Prometheus); `ring` must outlive the observer.
  GenerationObserver(WorkerMetrics* metrics, const RingCollectives* ring) : metrics_(metrics), ring_(ring) {}
  void OnStart(const RunInfo& info) override;
  void OnStep(const StepResult& result, double seconds) override;

 private:
  WorkerMetrics* metrics_;
  const RingCollectives* ring_;
  bool first_ = true;
};

}  // namespace shardline

#endif  // SHARDLINE_WORKER_LIFECYCLE_GENERATION_OBSERVER_H_
