// Learning-rate schedules: linear warmup, then constant, cosine or linear
// decay to base_lr * end_lr_ratio at the last step.
//
//   LrSchedule lr(cfg.schedule(), total_steps);
//   float rate = lr(step);   // step is 0-based
#ifndef SHARDLINE_WORKER_OPTIM_LR_SCHEDULE_H_
#define SHARDLINE_WORKER_OPTIM_LR_SCHEDULE_H_

#include <cstdint>

#include "proto/config.pb.h"

namespace shardline {

class LrSchedule {
 public:
  LrSchedule(const config::ScheduleConfig& config, int64_t total_steps);
  // The learning rate used by 0-based step `step`. Warmup step s uses
  // base_lr * (s + 1) / warmup_steps; decay runs from base_lr at the first
  // step after warmup to base_lr * end_lr_ratio at step total_steps - 1.
  float operator()(int64_t step) const;

 private:
  config::ScheduleConfig config_;
  int64_t total_steps_;
};

}  // namespace shardline

#endif  // SHARDLINE_WORKER_OPTIM_LR_SCHEDULE_H_
