// The Env's clocks (env.h) as absl types, and a stopwatch on them. Code
// outside the Env implementations reads time only through these (or the Env
// itself), and always of an Env it was given (there is no default: the
// process's Env is chosen once, where options are made), so a test's Env can
// move time everywhere.
//
//   Stopwatch watch(env);
//   ... work ...
//   double seconds = watch.Lap();        // since construction or the last Lap
//   ctx.set_deadline(DeadlineIn(absl::Seconds(5), env));   // gRPC: wall clock
#ifndef SHARDLINE_COMMON_PLATFORM_CLOCK_H_
#define SHARDLINE_COMMON_PLATFORM_CLOCK_H_

#include <chrono>
#include <cstdint>

#include "absl/time/time.h"
#include "common/platform/env.h"

namespace shardline {

// Wall-clock time: for timestamps people read and traces merged across hosts.
inline absl::Time WallNow(Env* env) { return absl::FromUnixMicros(env->NowUnixMicros()); }

// Monotonic time as an absl::Time: only differences between two readings
// mean anything.
inline absl::Time MonotonicNow(Env* env) { return absl::FromUnixMicros(env->NowMicros()); }

// The wall-clock instant `timeout` from now, in the type gRPC deadlines take.
inline std::chrono::system_clock::time_point DeadlineIn(absl::Duration timeout, Env* env) {
  return absl::ToChronoTime(WallNow(env) + timeout);
}

class Stopwatch {
 public:
  explicit Stopwatch(Env* env) : env_(env), start_(env->NowMicros()), last_(start_) {}
  // Seconds since the last Lap (or construction).
  double Lap() {
    const int64_t now = env_->NowMicros();
    const double s = static_cast<double>(now - last_) * 1e-6;
    last_ = now;
    return s;
  }
  // Time since construction (or Reset).
  absl::Duration Elapsed() const { return absl::Microseconds(env_->NowMicros() - start_); }
  double ElapsedSeconds() const { return absl::ToDoubleSeconds(Elapsed()); }
  void Reset() { start_ = last_ = env_->NowMicros(); }

 private:
  Env* env_;
  int64_t start_;
  int64_t last_;
};

}  // namespace shardline

#endif  // SHARDLINE_COMMON_PLATFORM_CLOCK_H_
