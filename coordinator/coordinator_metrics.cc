#include "coordinator/coordinator_metrics.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "common/observability/prometheus_util.h"
#include "coordinator/goodput.h"
#include "common/status/progress_line.h"

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
                     .Register(r)),
      eta_(NewGauge(r, "shardline_eta_seconds", "Estimated seconds until the last step (-1: unknown)")),
      checkpoint_failures_(NewCounter(r, "shardline_checkpoint_failures_total",
                                      "Checkpoint saves a worker reported failed, and commits that failed")),
      nonfinite_losses_(NewCounter(r, "shardline_nonfinite_loss_total",
                                   "Times a worker reported the loss or gradients non-finite (the job then fails)")),
      last_checkpoint_time_(NewGauge(r, "shardline_last_checkpoint_timestamp_seconds",
                                     "When the latest checkpoint was committed (the coordinator's start until one is)")),
      train_loss_(NewGauge(r, "shardline_train_loss", "Rank 0's latest train-line loss (metrics.jsonl)")),
      recoveries_(prometheus::BuildCounter()
                      .Name("shardline_recoveries_total")
                      .Help("Worlds that resumed from a restore, by where it came from (memory: the workers' "
                            "in-memory snapshots; disk: a committed checkpoint)")
                      .Register(r)),
      steps_redone_(NewCounter(r, "shardline_steps_redone_total",
                               "Steps done again after restores (furthest step reached minus the step restored)")),
      world_size_(NewGauge(r, "shardline_world_size",
                           "Workers in the running world (fewer than runtime.num_workers after an elastic shrink)")),
      world_changes_(NewCounter(r, "shardline_world_size_changes_total",
                                "Times the world re-formed with another size (runtime.min_workers), over the job's life")),
      numerics_info_(prometheus::BuildGauge()
                         .Name("shardline_numerics_info")
                         .Help("1 for the job's numerics fingerprint (role=\"job\") and for each other one "
                               "runtime.numerics RELAXED admitted (role=\"admitted\"), with its kernels")
                         .Register(r)),
      last_eval_accuracy_(NewGauge(r, "shardline_eval_accuracy", "Test accuracy of the latest evaluation")),
      best_eval_accuracy_(NewGauge(r, "shardline_best_eval_accuracy", "Test accuracy of the best evaluation so far")),
      last_eval_bits_per_byte_(NewGauge(r, "shardline_eval_bits_per_byte",
                                        "Validation loss of the latest evaluation of a text model, in bits per byte")),
      goodput_seconds_(NewCounter(r, "shardline_goodput_seconds_total",
                                  "Time spent on training steps done for the first time, over the job's life")),
      badput_seconds_(prometheus::BuildCounter()
                          .Name("shardline_badput_seconds_total")
                          .Help("Time lost, by kind (startup, data_loading, checkpoint_save, checkpoint_restore, "
                                "wasted_progress, recovery, evaluation), over the job's life")
                          .Register(r)),
      disruptions_(NewCounter(r, "shardline_disruptions_total", "Worlds broken and coordinator restarts, over the job's life")),
      goodput_ratio_(NewGauge(r, "shardline_goodput_ratio", "Goodput over all accounted time, over the job's life")),
      straggler_score_(prometheus::BuildGauge()
                           .Name("shardline_straggler_score")
                           .Help("Fastest rank's busy time per step over this rank's: 1 fastest, toward 0 a straggler")
                           .Register(r)),
      busy_per_step_(prometheus::BuildGauge()
                         .Name("shardline_rank_busy_seconds_per_step")
                         .Help("A rank's own work per step (not waiting on peers), recent average, as it reports")
                         .Register(r)),
      heartbeat_age_(prometheus::BuildGauge()
                         .Name("shardline_rank_heartbeat_age_seconds")
                         .Help("Seconds since a rank's last heartbeat report")
                         .Register(r)) {
  for (const char* kind : BadputKinds()) badput_seconds_.Add({{"kind", kind}});
  for (const char* source : {"memory", "disk"}) recoveries_.Add({{"source", source}});
  for (int s = coordinator::JobStatus::FORMING; s <= coordinator::JobStatus::FAILED; ++s) {
    job_state_.Add({{"state", StateName(static_cast<coordinator::JobStatus::State>(s))}});
  }
}

void CoordinatorMetrics::UpdateNumerics(const coordinator::JobStatus& s) {
  auto info = [this](const coordinator::NumericsRecord& n, const char* role) {
    numerics_info_
        .Add({{"fingerprint", absl::StrFormat("0x%016x", n.numerics().fingerprint())},
              {"kernels", n.numerics().kernels()},
              {"role", role}})
        .Set(1);
  };
  if (s.has_numerics()) info(s.numerics(), "job");
  for (const coordinator::NumericsRecord& n : s.numerics_changes()) info(n, "admitted");
}

void CoordinatorMetrics::Update(const coordinator::JobStatus& s) {
  generation_.Set(static_cast<double>(s.generation()));
  global_step_.Set(static_cast<double>(s.global_step()));
  total_steps_.Set(static_cast<double>(s.total_steps()));
  workers_registered_.Set(s.workers_registered());
  workers_alive_.Set(s.workers_alive());
  world_size_.Set(s.world_size());
  int64_t changes = 0;
  for (const coordinator::WorldChange& c : s.world_changes()) changes += c.from_size() > 0 ? 1 : 0;
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
  eta_.Set(s.eta_seconds());
  if (s.has_last_eval()) last_eval_accuracy_.Set(s.last_eval().accuracy());
  if (s.has_last_eval() && s.last_eval().has_bits_per_byte()) {
    last_eval_bits_per_byte_.Set(s.last_eval().bits_per_byte());
  }
  if (s.has_best_eval()) best_eval_accuracy_.Set(s.best_eval().accuracy());

  const coordinator::Goodput& g = s.goodput();
  auto advance = [](prometheus::Counter& c, double total, double* seen) {
    if (total > *seen) c.Increment(total - *seen);
    *seen = std::max(*seen, total);
  };
  advance(goodput_seconds_, g.goodput_seconds(), &goodput_seen_);
  advance(checkpoint_failures_, static_cast<double>(s.checkpoint_failures()), &checkpoint_failures_seen_);
  advance(nonfinite_losses_, static_cast<double>(s.nonfinite_losses()), &nonfinite_losses_seen_);
  last_checkpoint_time_.Set(s.last_checkpoint_unix_seconds());
  advance(recoveries_.Add({{"source", "memory"}}), static_cast<double>(s.memory_recoveries()), &memory_recoveries_seen_);
  advance(recoveries_.Add({{"source", "disk"}}), static_cast<double>(s.disk_recoveries()), &disk_recoveries_seen_);
  advance(steps_redone_, static_cast<double>(s.steps_redone()), &steps_redone_seen_);
  advance(world_changes_, static_cast<double>(changes), &world_changes_seen_);
  if (s.has_last_train()) train_loss_.Set(s.last_train().loss());
  UpdateNumerics(s);
  advance(disruptions_, static_cast<double>(g.disruptions()), &disruptions_seen_);
  for (const auto& [kind, seconds] : g.badput_seconds()) {
    advance(badput_seconds_.Add({{"kind", kind}}), seconds, &badput_seen_[kind]);
  }
  goodput_ratio_.Set(GoodputRatio(g));

  // Per-rank series exist for the ranks of the current world only.
  std::set<int> ranks;
  for (const coordinator::WorkerStatus& w : s.workers()) {
    auto it = ranks_seen_.find(w.rank());
    if (it == ranks_seen_.end()) {
      const std::map<std::string, std::string> label{{"rank", std::to_string(w.rank())}};
      it = ranks_seen_
               .emplace(w.rank(), RankSeries{&straggler_score_.Add(label), &busy_per_step_.Add(label),
                                             &heartbeat_age_.Add(label)})
               .first;
    }
    it->second.straggler_score->Set(w.straggler_score());
    it->second.busy_per_step->Set(w.busy_seconds_per_step());
    it->second.heartbeat_age->Set(w.seconds_since_heartbeat());
    ranks.insert(w.rank());
  }
  for (auto it = ranks_seen_.begin(); it != ranks_seen_.end();) {
    if (ranks.count(it->first) > 0) {
      ++it;
      continue;
    }
    straggler_score_.Remove(it->second.straggler_score);
    busy_per_step_.Remove(it->second.busy_per_step);
    heartbeat_age_.Remove(it->second.heartbeat_age);
    it = ranks_seen_.erase(it);
  }
}

}  // namespace shardline
