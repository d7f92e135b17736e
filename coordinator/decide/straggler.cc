#include "coordinator/decide/straggler.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_format.h"

namespace shardline {

void ScoreStragglers(google::protobuf::RepeatedPtrField<coordinator::WorkerStatus>* workers) {
  double fastest = std::numeric_limits<double>::infinity();
  for (const coordinator::WorkerStatus& w : *workers) {
    if (w.busy_seconds_per_step() > 0) fastest = std::min(fastest, w.busy_seconds_per_step());
  }
  for (coordinator::WorkerStatus& w : *workers) {
    w.set_straggler_score(w.busy_seconds_per_step() > 0 ? fastest / w.busy_seconds_per_step() : 0.0);
  }
}

std::vector<StragglerChange> StragglerWatch::Observe(const coordinator::JobStatus& status, absl::Time now) {
  std::vector<StragglerChange> changes;
  if (status.generation() != generation_) {  // a new world: new processes, new scores
    generation_ = status.generation();
    ranks_.clear();
  }
  if (status.state() != coordinator::JobStatus::RUNNING && status.state() != coordinator::JobStatus::STOPPING) return changes;
  for (const coordinator::WorkerStatus& w : status.workers()) {
    Track& t = ranks_[w.rank()];
    const bool below = w.straggler_score() > 0 && w.straggler_score() < options_.threshold;
    if (!below) {
      if (t.flagged) {
        changes.push_back({w.rank(), false,
                           absl::StrFormat("rank %d (%s) is no longer a straggler: score %.2f", w.rank(),
                                           w.address(), w.straggler_score())});
      }
      t = Track();
      continue;
    }
    if (t.below_since == absl::InfiniteFuture()) t.below_since = now;
    if (!t.flagged && now - t.below_since >= options_.sustain) {
      t.flagged = true;
      changes.push_back({w.rank(), true, absl::StrFormat(
          "rank %d (%s) is a straggler: score %.2f < %.2f for %s (%.1f ms of its own work per step; the fastest "
          "rank needs %.1f ms); every rank waits for it",
          w.rank(), w.address(), w.straggler_score(), options_.threshold, absl::FormatDuration(now - t.below_since),
          w.busy_seconds_per_step() * 1e3, w.busy_seconds_per_step() * w.straggler_score() * 1e3)});
    }
  }
  return changes;
}

int StragglerWatch::flagged() const {
  int n = 0;
  for (const auto& [rank, t] : ranks_) n += t.flagged ? 1 : 0;
  return n;
}

}  // namespace shardline
