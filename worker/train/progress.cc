#include "worker/train/progress.h"

#include <cstdio>

#include "absl/strings/str_format.h"
#include "common/platform/logging.h"

namespace shardline {

std::string FormatDuration(double seconds) {
  const int64_t s = static_cast<int64_t>(seconds + 0.5);
  if (s >= 3600) return absl::StrFormat("%d:%02d:%02d", s / 3600, (s / 60) % 60, s % 60);
  return absl::StrFormat("%d:%02d", s / 60, s % 60);
}

Progress::Progress(int64_t total_steps, int64_t steps_per_epoch, int global_batch_size,
                   int64_t log_every)
    : total_steps_(total_steps),
      steps_per_epoch_(steps_per_epoch),
      global_batch_size_(global_batch_size),
      log_every_(log_every) {}

std::string Progress::Line(int64_t steps_done, double loss, double samples_per_second) const {
  const double epoch = static_cast<double>(steps_done) / static_cast<double>(steps_per_epoch_);
  const double eta = samples_per_second > 0
                         ? static_cast<double>(total_steps_ - steps_done) * global_batch_size_ /
                               samples_per_second
                         : 0;
  const std::string rate = samples_per_second >= 1000
                               ? absl::StrFormat("%.1fk", samples_per_second / 1000)
                               : absl::StrFormat("%.0f", samples_per_second);
  return absl::StrFormat("step %d/%d | epoch %.2f | loss %.4f | %s samples/s | ETA %s",
                         steps_done, total_steps_, epoch, loss, rate, FormatDuration(eta));
}

void Progress::Step(int64_t steps_done, double loss, double train_seconds) {
  ++window_steps_;
  if (train_seconds - window_start_ >= 1.0 || rate_ == 0) {
    if (train_seconds > window_start_) {
      rate_ = static_cast<double>(window_steps_) * global_batch_size_ /
              (train_seconds - window_start_);
    }
    window_steps_ = 0;
    window_start_ = train_seconds;
  }
  if (logging::StderrIsTerminal()) {
    if (train_seconds - last_draw_ >= 0.2 || steps_done == total_steps_) {
      logging::SetStatusLine(Line(steps_done, loss, rate_));
      last_draw_ = train_seconds;
    }
  } else if (steps_done % log_every_ == 0 || steps_done == total_steps_) {
    SLOG(INFO) << Line(steps_done, loss, rate_);
  }
}

void Progress::Finish() { logging::SetStatusLine(""); }

}  // namespace shardline
