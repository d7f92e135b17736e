#include "worker/lifecycle/watchdog.h"

#include <atomic>
#include <string>
#include <thread>

#include "tests/util/fault_env.h"
#include "common/platform/mutex.h"
#include "gtest/gtest.h"

namespace shardline {
namespace {

// A clock that moves only by the watchdog's own sleeps, each of which
// also advances the watched step counter while `moving`: the tests never
// sleep for real.
struct FakeClock {
  explicit FakeClock(std::atomic<int64_t>* steps) {
    env.UseManualClock(1'000'000'000);
    env.OnSleep([this, steps] {
      if (moving.load()) ++*steps;
    });
  }
  FaultEnv env;
  std::atomic<bool> moving{false};
};

struct Calls {
  Mutex mu;
  std::string what ABSL_GUARDED_BY(mu);
  int64_t stuck_at_micros ABSL_GUARDED_BY(mu) = -1;
  int64_t still_stuck_at_micros ABSL_GUARDED_BY(mu) = -1;
  int stuck_calls ABSL_GUARDED_BY(mu) = 0;
  Notification still_stuck;
};

WatchdogOptions Options(Env* env, Calls* calls) {
  WatchdogOptions o;
  o.timeout = absl::Seconds(10);
  o.poll = absl::Milliseconds(100);
  o.rank = 3;
  o.env = env;
  o.on_stuck = [env, calls](const std::string& what) {
    MutexLock lock(&calls->mu);
    calls->what = what;
    calls->stuck_at_micros = env->NowMicros();
    ++calls->stuck_calls;
  };
  o.on_still_stuck = [env, calls] {
    {
      MutexLock lock(&calls->mu);
      calls->still_stuck_at_micros = env->NowMicros();
    }
    calls->still_stuck.Notify();
  };
  return o;
}

TEST(WatchdogTest, AStuckCounterIsReportedAfterTheTimeoutThenEscalatesAfterTwice) {
  std::atomic<int64_t> steps{41};
  FakeClock clock(&steps);
  FaultEnv& env = clock.env;
  Calls calls;
  const int64_t start = env.NowMicros();
  {
    Watchdog watchdog(&steps, Options(&env, &calls));
    ASSERT_TRUE(calls.still_stuck.WaitForNotificationWithTimeout(absl::Seconds(60)));
  }
  MutexLock lock(&calls.mu);
  EXPECT_EQ(calls.stuck_calls, 1);
  EXPECT_EQ(calls.what.rfind("rank 3 made no progress past step 41 for 10s", 0), 0u) << calls.what;
  // Each verdict comes within one poll of its deadline.
  EXPECT_GE(calls.stuck_at_micros - start, 10'000'000);
  EXPECT_LE(calls.stuck_at_micros - start, 10'100'000);
  EXPECT_GE(calls.still_stuck_at_micros - start, 20'000'000);
  EXPECT_LE(calls.still_stuck_at_micros - start, 20'100'000);
}

TEST(WatchdogTest, ACounterThatMovesIsNeverReported) {
  std::atomic<int64_t> steps{0};
  FakeClock clock(&steps);
  FaultEnv& env = clock.env;
  clock.moving = true;
  Calls calls;
  {
    Watchdog watchdog(&steps, Options(&env, &calls));
    // 1000 polls = 100 s of fake time, ten timeouts, with progress at each.
    while (steps.load() < 1000) std::this_thread::yield();
    clock.moving = false;
    // Now stuck: the report comes one timeout after the last move.
    ASSERT_TRUE(calls.still_stuck.WaitForNotificationWithTimeout(absl::Seconds(60)));
  }
  MutexLock lock(&calls.mu);
  EXPECT_EQ(calls.stuck_calls, 1);
  EXPECT_NE(calls.what.find("past step " + std::to_string(steps.load())), std::string::npos) << calls.what;
  EXPECT_GE(calls.still_stuck_at_micros - calls.stuck_at_micros, 10'000'000);
}

TEST(WatchdogTest, StopsWithoutCallingBackWhenDestroyedInTime) {
  std::atomic<int64_t> steps{0};
  FakeClock clock(&steps);
  FaultEnv& env = clock.env;
  Calls calls;
  WatchdogOptions o = Options(&env, &calls);
  o.timeout = absl::Hours(1000);  // never reached within the few polls before destruction
  { Watchdog watchdog(&steps, o); }
  MutexLock lock(&calls.mu);
  EXPECT_EQ(calls.stuck_calls, 0);
  EXPECT_FALSE(calls.still_stuck.HasBeenNotified());
}

}  // namespace
}  // namespace shardline
