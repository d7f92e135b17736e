#include "worker/optim/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace shardline {

LrSchedule::LrSchedule(const config::ScheduleConfig& config, int64_t total_steps)
    : config_(config), total_steps_(total_steps) {}

float LrSchedule::operator()(int64_t step) const {
  const double base = config_.base_lr();
  const int64_t warmup = config_.warmup_steps();
  if (step < warmup) return static_cast<float>(base * static_cast<double>(step + 1) / warmup);
  const double end = base * config_.end_lr_ratio();
  const int64_t span = std::max<int64_t>(1, total_steps_ - 1 - warmup);
  const double progress = std::min(1.0, static_cast<double>(step - warmup) / span);
  switch (config_.decay()) {
    case config::COSINE:
      return static_cast<float>(end + (base - end) * 0.5 * (1.0 + std::cos(M_PI * progress)));
    case config::LINEAR:
      return static_cast<float>(base + (end - base) * progress);
    default:
      return static_cast<float>(base);
  }
}

}  // namespace shardline
