// The coordinator tests' Env: a clock that moves only when a test says so,
// and a disk that can be made to stall.
#ifndef SHARDLINE_TESTS_COORDINATOR_TEST_ENV_H_
#define SHARDLINE_TESTS_COORDINATOR_TEST_ENV_H_

#include <atomic>
#include <string>

#include "absl/time/time.h"
#include "common/platform/env_wrapper.h"
#include "common/platform/mutex.h"

namespace shardline {

// The default Env with a clock that moves only when a test says so, and a
// GetFileSize (the commit's first disk access) that can be made to block,
// as a disk that has stalled would.
class TestEnv : public EnvWrapper {
 public:
  TestEnv() : EnvWrapper(Env::Default()) {}
  int64_t NowMicros() override { return now_micros_.load(); }
  void Advance(absl::Duration d) { now_micros_ += absl::ToInt64Microseconds(d); }

  absl::StatusOr<int64_t> GetFileSize(const std::string& path) override {
    if (stall_.load()) {
      if (!stalled_.HasBeenNotified()) stalled_.Notify();
      release_.WaitForNotification();
    }
    return EnvWrapper::GetFileSize(path);
  }
  void StallDisk() { stall_ = true; }
  Notification& stalled() { return stalled_; }
  void ReleaseDisk() { release_.Notify(); }

 private:
  std::atomic<int64_t> now_micros_{1'000'000'000'000};
  std::atomic<bool> stall_{false};
  Notification stalled_, release_;
};

}  // namespace shardline

#endif  // SHARDLINE_TESTS_COORDINATOR_TEST_ENV_H_
