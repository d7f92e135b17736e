#include "worker/lifecycle/generation_observer.h"

#include "common/platform/logging.h"

namespace shardline {

void GenerationObserver::OnStart(const RunInfo& info) {
  if (metrics_ != nullptr) metrics_->OnStart(info);
}

void GenerationObserver::OnStep(const StepResult& result, double seconds) {
  if (first_) {
    SLOG(INFO) << "first step of this generation done (step " << result.step + 1 << ")";
    busy_per_step_ = result.times.busy();
    first_ = false;
  } else {
    busy_per_step_ += kBusySmoothing * (result.times.busy() - busy_per_step_);
  }
  time_.set_data_seconds(time_.data_seconds() + result.times.data);
  heartbeat_->SetTime(time_, busy_per_step_);
  if (metrics_ == nullptr) return;
  metrics_->OnStep(result, seconds);
  metrics_->SetTransportBytes(ring_->bytes_sent(), ring_->bytes_received());
}

void GenerationObserver::OnOverhead(Overhead kind, double seconds) {
  switch (kind) {
    case Overhead::kRestore: time_.set_restore_seconds(time_.restore_seconds() + seconds); break;
    case Overhead::kEvaluation: time_.set_eval_seconds(time_.eval_seconds() + seconds); break;
    case Overhead::kCheckpointStall:
    case Overhead::kMemorySnapshot:  // a checkpoint's cost too (goodput's checkpoint_save)
      time_.set_checkpoint_seconds(time_.checkpoint_seconds() + seconds);
      break;
  }
  heartbeat_->SetTime(time_, busy_per_step_);
  if (metrics_ != nullptr) metrics_->OnOverhead(kind, seconds);
}

void GenerationObserver::OnTrace(int64_t step, const std::vector<PhaseSpan>& spans) {
  if (traces_ == nullptr) return;
  const absl::Status written = traces_->Write(step, spans);
  // A trace is a diagnostic: losing one never stops training.
  if (!written.ok()) SLOG(WARNING) << "trace of step " << step << " not written: " << written;
}

void GenerationObserver::OnOuterStep(const OuterStepReport& report) {
  if (metrics_ != nullptr) metrics_->OnOuterStep(report);
  outer_.set_step(report.step);
  outer_.set_outer_steps(outer_.outer_steps() + 1);
  outer_.set_seconds(report.seconds);
  outer_.set_bytes_sent(report.bytes_sent);
  outer_.set_divergence(report.pseudo_gradient_norm);
  outer_.set_islands(report.islands);
  outer_.set_total_seconds(outer_.total_seconds() + report.seconds);
  heartbeat_->SetOuter(outer_);
}

}  // namespace shardline
