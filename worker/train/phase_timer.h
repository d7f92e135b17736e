// One clock for the phases of a training step: each Since() returns the
// phase's seconds (for PhaseTimes) and, on a traced step, appends its span
// in wall-clock Unix microseconds (so ranks' traces merge) to `spans`.
// Marks are monotonic readings of the Env's clock; a span is mapped to the
// wall clock by the offset read once, when the timer is made.
//
//   PhaseTimer timer(env, spans);
//   int64_t begin = timer.Mark();
//   ... reduce-scatter ...
//   times.reduce_scatter = timer.Since("reduce_scatter", begin);
#ifndef SHARDLINE_WORKER_TRAIN_PHASE_TIMER_H_
#define SHARDLINE_WORKER_TRAIN_PHASE_TIMER_H_

#include <cstdint>
#include <vector>

#include "common/platform/env.h"

namespace shardline {

// One phase of a traced step, in wall-clock Unix microseconds. A step's
// spans nest by time: "step" holds "compute" (holding "data", "forward",
// "backward" per micro-batch), "reduce_scatter", "optimizer" (holding
// "clip" - this rank's share of the gradient norm -, "wait_peers" - the
// scalar all-reduce of loss, norm and votes, where a fast rank waits for the
// slowest -, "checkpoint_snapshot" and "update") and, on log steps,
// "norms". "all_gather" spans are each bucket's gather inside "update"
// without overlap; with it, the waits for the last step's gathers inside
// "forward" ("reduce_scatter" is then the wait after backward).
struct PhaseSpan {
  const char* name;  // a string literal
  int64_t begin_micros;
  int64_t end_micros;
};

class PhaseTimer {
 public:
  // `spans` null: an untraced step (nothing is recorded, times still are).
  PhaseTimer(Env* env, std::vector<PhaseSpan>* spans)
      : env_(env), spans_(spans), wall_offset_(spans != nullptr ? env->NowUnixMicros() - env->NowMicros() : 0) {}

  // Now, as a phase's begin.
  int64_t Mark() const { return env_->NowMicros(); }

  // The phase `name` ran from `begin` (an earlier Mark) until now: its
  // seconds; its span is recorded on a traced step.
  double Since(const char* name, int64_t begin) {
    const int64_t now = env_->NowMicros();
    if (spans_ != nullptr) spans_->push_back(PhaseSpan{name, begin + wall_offset_, now + wall_offset_});
    return static_cast<double>(now - begin) * 1e-6;
  }

 private:
  Env* const env_;
  std::vector<PhaseSpan>* const spans_;
  const int64_t wall_offset_;
};

}  // namespace shardline

#endif  // SHARDLINE_WORKER_TRAIN_PHASE_TIMER_H_
