#include "coordinator/decide/report_rules.h"

#include "absl/strings/str_cat.h"
#include "common/job/best_eval.h"

namespace shardline {

StepRate StartStepRate(int64_t steps_done, absl::Time now) {
  StepRate rate;
  rate.window_steps = steps_done;
  rate.window_start = now;
  return rate;
}

StepRate NextStepRate(const StepRate& rate, int64_t steps_done, absl::Time now) {
  if (now - rate.window_start < absl::Seconds(1)) return rate;
  StepRate next = StartStepRate(steps_done, now);
  next.per_second = static_cast<double>(steps_done - rate.window_steps) / absl::ToDoubleSeconds(now - rate.window_start);
  return next;
}

bool IsBetterEval(const metrics::MetricRecord& record, const metrics::MetricRecord& best,
                  const config::CheckpointConfig& policy) {
  if (!best.has_step()) return true;
  return BeatsBest(policy, BestMetricValue(policy, {record.loss(), record.accuracy(), record.bits_per_byte()}),
                   BestMetricValue(policy, {best.loss(), best.accuracy(), best.bits_per_byte()}));
}

EvalsSeen NoteEvals(EvalsSeen seen, const google::protobuf::RepeatedPtrField<metrics::MetricRecord>& records,
                    const config::CheckpointConfig& policy) {
  for (const metrics::MetricRecord& record : records) {
    if (record.split() == metrics::MetricRecord::train) seen.last_train = record;
    if (record.split() == metrics::MetricRecord::eval) {
      seen.last_eval = record;
      if (IsBetterEval(record, seen.best_eval, policy)) seen.best_eval = record;
    }
  }
  return seen;
}

BadSnapshotVerdict JudgeBadSnapshot(int rank, int64_t bad_step, int64_t restoring_step,
                                    const std::set<int64_t>& known_bad) {
  BadSnapshotVerdict v;
  if (bad_step <= 0 || bad_step != restoring_step || known_bad.count(bad_step) > 0) return v;
  v.break_world = true;
  v.why = absl::StrCat("its in-memory snapshot of step ", bad_step, " failed on rank ", rank);
  return v;
}

}  // namespace shardline
