#include "worker/lifecycle/watchdog.h"

#include "absl/strings/str_cat.h"
#include "common/platform/logging.h"

namespace shardline {

Watchdog::Watchdog(const std::atomic<int64_t>* steps, WatchdogOptions options)
    : steps_(steps), options_(std::move(options)), thread_([this] {
        SCHECK(options_.env != nullptr) << "WatchdogOptions.env is required";
        Run();
      }) {}

Watchdog::~Watchdog() {
  stop_ = true;
  thread_.join();
}

void Watchdog::Run() {
  Env* env = options_.env;
  int64_t last = steps_->load();
  int64_t moved_micros = env->NowMicros();
  bool reported = false;
  while (!stop_) {
    env->SleepForMicros(absl::ToInt64Microseconds(options_.poll));
    const int64_t steps = steps_->load();
    const int64_t now = env->NowMicros();
    if (steps != last) {
      last = steps;
      moved_micros = now;
      reported = false;
      continue;
    }
    const absl::Duration stuck = absl::Microseconds(now - moved_micros);
    if (!reported && stuck >= options_.timeout) {
      reported = true;
      if (options_.on_stuck) {
        options_.on_stuck(absl::StrCat("rank ", options_.rank, " made no progress past step ", last, " for ",
                                       absl::FormatDuration(stuck)));
      }
    } else if (reported && stuck >= 2 * options_.timeout) {
      if (options_.on_still_stuck) options_.on_still_stuck();
      return;
    }
  }
}

}  // namespace shardline
