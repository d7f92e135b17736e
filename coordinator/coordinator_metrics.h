// The coordinator's Prometheus metrics, built once on a registry that is
// passed in.
//
//   auto registry = std::make_shared<prometheus::Registry>();
//   CoordinatorMetrics metrics(*registry);
//   metrics.Update(job.Snapshot());
#ifndef SHARDLINE_COORDINATOR_COORDINATOR_METRICS_H_
#define SHARDLINE_COORDINATOR_COORDINATOR_METRICS_H_

#include <map>
#include <set>
#include <string>

#include "proto/coordinator.pb.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"

namespace shardline {

class CoordinatorMetrics {
 public:
  explicit CoordinatorMetrics(prometheus::Registry& registry);
  // Sets every gauge from the status (with its goodput account and
  // workers) and advances the counters to its totals.
  void Update(const coordinator::JobStatus& s);

 private:
  // shardline_numerics_info from the status's numerics records.
  void UpdateNumerics(const coordinator::JobStatus& s);

  prometheus::Gauge& generation_;
  prometheus::Gauge& global_step_;
  prometheus::Gauge& total_steps_;
  prometheus::Gauge& workers_registered_;
  prometheus::Gauge& workers_alive_;
  prometheus::Gauge& last_checkpoint_;
  prometheus::Gauge& bad_checkpoints_;
  prometheus::Counter& worker_losses_;
  prometheus::Family<prometheus::Gauge>& job_state_;
  prometheus::Gauge& eta_;
  prometheus::Counter& checkpoint_failures_;
  prometheus::Counter& nonfinite_losses_;
  prometheus::Gauge& last_checkpoint_time_;
  prometheus::Gauge& train_loss_;
  prometheus::Family<prometheus::Counter>& recoveries_;
  prometheus::Counter& steps_redone_;
  prometheus::Gauge& world_size_;
  prometheus::Counter& world_changes_;
  // 1 for the job's numerics fingerprint and each one RELAXED admitted.
  prometheus::Family<prometheus::Gauge>& numerics_info_;
  prometheus::Gauge& last_eval_accuracy_;
  prometheus::Gauge& best_eval_accuracy_;
  prometheus::Gauge& last_eval_bits_per_byte_;
  // Goodput: totals over the job's life (they continue across coordinator
  // restarts, so they are counters only in the sense of never decreasing).
  prometheus::Counter& goodput_seconds_;
  prometheus::Family<prometheus::Counter>& badput_seconds_;
  prometheus::Counter& disruptions_;
  prometheus::Gauge& goodput_ratio_;
  prometheus::Family<prometheus::Gauge>& straggler_score_;
  prometheus::Family<prometheus::Gauge>& busy_per_step_;
  prometheus::Family<prometheus::Gauge>& heartbeat_age_;
  double losses_seen_ = 0;
  double goodput_seen_ = 0;
  double checkpoint_failures_seen_ = 0;
  double nonfinite_losses_seen_ = 0;
  double memory_recoveries_seen_ = 0;
  double disk_recoveries_seen_ = 0;
  double steps_redone_seen_ = 0;
  double world_changes_seen_ = 0;
  double disruptions_seen_ = 0;
  std::map<std::string, double> badput_seen_;
  // The per-rank series of the ranks that have them, looked up once each
  // (a Family lookup hashes the whole label map: at 4,096 ranks, ten times
  // a second, that was a visible share of the coordinator's CPU).
  struct RankSeries {
    prometheus::Gauge* straggler_score;
    prometheus::Gauge* busy_per_step;
    prometheus::Gauge* heartbeat_age;
  };
  std::map<int, RankSeries> ranks_seen_;
};

}  // namespace shardline

#endif  // SHARDLINE_COORDINATOR_COORDINATOR_METRICS_H_
