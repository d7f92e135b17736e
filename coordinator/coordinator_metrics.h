// The coordinator's Prometheus metrics, built once on a registry that is
// passed in.
//
//   auto registry = std::make_shared<prometheus::Registry>();
//   CoordinatorMetrics metrics(*registry);
//   metrics.Update(job.Snapshot());
#ifndef SHARDLINE_COORDINATOR_COORDINATOR_METRICS_H_
#define SHARDLINE_COORDINATOR_COORDINATOR_METRICS_H_

#include "proto/coordinator.pb.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"

namespace shardline {

class CoordinatorMetrics {
 public:
  explicit CoordinatorMetrics(prometheus::Registry& registry);
  // Sets every gauge from the snapshot and advances the loss counter.
  void Update(const coordinator::JobStatus& s);

 private:
  prometheus::Gauge& generation_;
  prometheus::Gauge& global_step_;
  prometheus::Gauge& total_steps_;
  prometheus::Gauge& workers_registered_;
  prometheus::Gauge& workers_alive_;
  prometheus::Gauge& last_checkpoint_;
  prometheus::Gauge& bad_checkpoints_;
  prometheus::Counter& worker_losses_;
  prometheus::Family<prometheus::Gauge>& job_state_;
  double losses_seen_ = 0;
};

}  // namespace shardline

#endif  // SHARDLINE_COORDINATOR_COORDINATOR_METRICS_H_
