#include "coordinator/status_views.h"

#include <utility>

#include "common/platform/logging.h"
#include "common/status/goodput_account.h"
#include "common/status/progress_line.h"

namespace shardline {

StatusViews::StatusViews(Job* job, GoodputLedger* goodput, CoordinatorMetrics* metrics,
                         std::unique_ptr<TraceLog> trace, StatusViewsOptions options)
    : job_(job), goodput_(goodput), metrics_(metrics), trace_(std::move(trace)), options_(options),
      stragglers_(options.stragglers) {}

coordinator::JobStatus StatusViews::Status() const {
  coordinator::JobStatus s = job_->Snapshot();
  *s.mutable_goodput() = goodput_->Snapshot();
  return s;
}

coordinator::JobStatus StatusViews::Advance(absl::Time now) {
  coordinator::JobStatus s = job_->Snapshot();
  goodput_->Advance(s, now);
  *s.mutable_goodput() = goodput_->Snapshot();
  return s;
}

void StatusViews::Trace(const coordinator::JobStatus& s, absl::Time now) {
  if (trace_ == nullptr) return;
  if (absl::Status written = trace_->Observe(s, now); !written.ok()) {
    SLOG(WARNING) << "trace: " << written << "; the coordinator's track stops here";
    trace_.reset();
  }
}

void StatusViews::Tick(absl::Time now) {
  const coordinator::JobStatus snap = Advance(now);
  if (absl::Status persisted = goodput_->MaybePersist(now); !persisted.ok()) SLOG(WARNING) << persisted;
  for (const StragglerChange& c : stragglers_.Observe(snap, now)) {
    if (c.straggler) {
      SLOG(WARNING) << c.line;
    } else {
      SLOG(INFO) << c.line;
    }
  }
  Trace(snap, now);
  metrics_->Update(snap);
  if (options_.progress_every_seconds > 0 && now - last_progress_ >= absl::Seconds(options_.progress_every_seconds)) {
    SLOG(INFO) << ProgressLine(snap);
    last_progress_ = now;
  }
}

void StatusViews::Final(absl::Time now) {
  const coordinator::JobStatus snap = Advance(now);
  if (absl::Status persisted = goodput_->MaybePersist(now, /*force=*/true); !persisted.ok()) {
    SLOG(WARNING) << persisted;
  }
  metrics_->Update(snap);
  Trace(snap, now);
  SLOG(INFO) << ProgressLine(snap);
  SLOG(INFO) << GoodputLine(snap.goodput());
}

}  // namespace shardline
