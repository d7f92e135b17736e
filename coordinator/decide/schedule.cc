#include "coordinator/decide/schedule.h"

#include <algorithm>
#include <cmath>

namespace shardline {

int64_t StepAhead(int64_t furthest_done, double steps_per_second, int64_t total_steps) {
  const int64_t margin = std::max<int64_t>(2, static_cast<int64_t>(std::ceil(steps_per_second * 0.5)));
  return total_steps > 0 ? std::min(total_steps, furthest_done + margin) : furthest_done + margin;
}

bool PeriodicSaveDue(absl::Time now, absl::Time last_save, double period_seconds) {
  return period_seconds > 0 && now - last_save >= absl::Seconds(period_seconds);
}

}  // namespace shardline
