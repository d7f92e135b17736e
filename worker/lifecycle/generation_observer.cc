#include "worker/lifecycle/generation_observer.h"

#include "common/logging.h"

namespace shardline {

void GenerationObserver::OnStart(const RunInfo& info) {
  if (metrics_ != nullptr) metrics_->OnStart(info);
}

void GenerationObserver::OnStep(const StepResult& result, double seconds) {
  if (first_) {
    SLOG(INFO) << "first step of this generation done (step " << result.step + 1 << ")";
    first_ = false;
  }
  if (metrics_ == nullptr) return;
  metrics_->OnStep(result, seconds);
  metrics_->SetTransportBytes(ring_->bytes_sent(), ring_->bytes_received());
}

}  // namespace shardline
