// The rules the Job applies to a worker's report beside membership and the
// checkpoint book, as pure steps (state and report in, new state out): rank
// 0's step rate, the newest and best evals, and what a snapshot that could
// not be restored does to the world. No lock, clock or I/O; the Job holds
// their state under its lock and calls them with its time.
//
//   rate_ = NextStepRate(rate_, report.steps_done(), now);
//   evals_ = NoteEvals(evals_, report.metrics(), config.checkpoint());
//   if (BadSnapshotVerdict v = JudgeBadSnapshot(...); v.break_world) ...
#ifndef SHARDLINE_COORDINATOR_DECIDE_REPORT_RULES_H_
#define SHARDLINE_COORDINATOR_DECIDE_REPORT_RULES_H_

#include <cstdint>
#include <set>
#include <string>

#include "absl/time/time.h"
#include "google/protobuf/repeated_field.h"
#include "proto/config.pb.h"
#include "proto/metrics.pb.h"

namespace shardline {

// Rank 0's steps a second, measured over windows of at least one second so
// a burst of reports does not swing it (it sets the stop margin: StepAhead).
struct StepRate {
  int64_t window_steps = 0;                  // steps done when the window opened
  absl::Time window_start = absl::InfinitePast();
  double per_second = 0;                     // the last closed window's rate; 0 before one
};

// A window opened at `now` with `steps_done` (a world forming restarts the
// measure: its rank 0 may start from another step).
StepRate StartStepRate(int64_t steps_done, absl::Time now);

// The rate after rank 0 reports `steps_done` at `now`: unchanged until the
// window is a second old, then that window's rate, and a new window opens.
StepRate NextStepRate(const StepRate& rate, int64_t steps_done, absl::Time now);

// The newest train and eval records and the best eval, by the one best-eval
// rule (common/job/best_eval.h: checkpoint.best_metric and best_mode;
// accuracy without one). A record without a step is unset.
struct EvalsSeen {
  metrics::MetricRecord last_train;
  metrics::MetricRecord last_eval;
  metrics::MetricRecord best_eval;
};

// True if `record` beats `best` (an unset best: anything does).
bool IsBetterEval(const metrics::MetricRecord& record, const metrics::MetricRecord& best,
                  const config::CheckpointConfig& policy);

// `seen` after the records of one report, in order.
EvalsSeen NoteEvals(EvalsSeen seen, const google::protobuf::RepeatedPtrField<metrics::MetricRecord>& records,
                    const config::CheckpointConfig& policy);

// What a worker's report that it could not restore the in-memory snapshot
// of `bad_step` does: only a report about the snapshot this world restores
// from (`restoring_step`), and only its first, breaks the world so the next
// one restores from another snapshot or from disk; `known_bad` holds the
// steps already judged (the caller adds `bad_step` when told to break).
struct BadSnapshotVerdict {
  bool break_world = false;
  std::string why;  // the Break's reason when break_world
};
BadSnapshotVerdict JudgeBadSnapshot(int rank, int64_t bad_step, int64_t restoring_step,
                                    const std::set<int64_t>& known_bad);

}  // namespace shardline

#endif  // SHARDLINE_COORDINATOR_DECIDE_REPORT_RULES_H_
