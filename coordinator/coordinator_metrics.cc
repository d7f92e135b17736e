#include "coordinator/coordinator_metrics.h"

#include "common/prometheus_util.h"
#include "coordinator/progress_line.h"

namespace shardline {
CoordinatorMetrics::CoordinatorMetrics(prometheus::Registry& r)
    : generation_(NewGauge(r, "shardline_generation", "World generation; bumped on every restart of the world")),
      global_step_(NewGauge(r, "shardline_global_step", "Steps every worker of the generation has finished")),
      total_steps_(NewGauge(r, "shardline_total_steps", "Steps the job runs in total")),
      workers_registered_(NewGauge(r, "shardline_workers_registered", "Workers in the world (or registered for the next one)")),
      workers_alive_(NewGauge(r, "shardline_workers_alive", "Workers with a live heartbeat stream")),
      last_checkpoint_(NewGauge(r, "shardline_last_checkpoint_step", "Step of the latest committed checkpoint (0: none)")),
      bad_checkpoints_(NewGauge(r, "shardline_bad_checkpoints", "Committed checkpoints that failed verification and are skipped")),
      worker_losses_(NewCounter(r, "shardline_worker_losses_total", "Generations ended by a lost worker")),
      job_state_(prometheus::BuildGauge()
                     .Name("shardline_job_state")
                     .Help("1 for the job's current state, 0 for the others")
                     .Register(r)) {
  for (int s = coordinator::JobStatus::FORMING; s <= coordinator::JobStatus::FAILED; ++s) {
    job_state_.Add({{"state", StateName(static_cast<coordinator::JobStatus::State>(s))}});
  }
}

void CoordinatorMetrics::Update(const coordinator::JobStatus& s) {
  generation_.Set(static_cast<double>(s.generation()));
  global_step_.Set(static_cast<double>(s.global_step()));
  total_steps_.Set(static_cast<double>(s.total_steps()));
  workers_registered_.Set(s.workers_registered());
  workers_alive_.Set(s.workers_alive());
  last_checkpoint_.Set(static_cast<double>(s.last_checkpoint_step()));
  bad_checkpoints_.Set(static_cast<double>(s.bad_checkpoints()));
  const double losses = static_cast<double>(s.worker_losses());
  if (losses > losses_seen_) {
    worker_losses_.Increment(losses - losses_seen_);
    losses_seen_ = losses;
  }
  for (int st = coordinator::JobStatus::FORMING; st <= coordinator::JobStatus::FAILED; ++st) {
    job_state_.Add({{"state", StateName(static_cast<coordinator::JobStatus::State>(st))}}).Set(st == s.state() ? 1 : 0);
  }
}

}  // namespace shardline
