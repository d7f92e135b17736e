// The job's curves in memory, for the live status page: rank 0's train and
// eval records as they pass to metrics.jsonl, bounded by thinning (every
// other point dropped when full), seeded from an existing metrics.jsonl so a
// restarted coordinator shows the whole run.
//
//   MetricsHistory history;
//   RETURN_IF_ERROR(history.Load(env, workdir + "/metrics.jsonl"));
//   MetricsTee sink({file.get(), &history});   // the Job writes to both
//   std::vector<metrics::MetricRecord> train = history.Train();
#ifndef SHARDLINE_COORDINATOR_METRICS_HISTORY_H_
#define SHARDLINE_COORDINATOR_METRICS_HISTORY_H_

#include <cstddef>
#include <string>
#include <vector>

#include "common/platform/env.h"
#include "common/observability/metrics_writer.h"
#include "common/platform/mutex.h"

namespace shardline {

class MetricsHistory : public MetricsSink {
 public:
  // At most `max_points` records per split are kept (at least 2).
  explicit MetricsHistory(size_t max_points = 1000) : max_points_(max_points < 2 ? 2 : max_points) {}

  // Appends the records of a metrics.jsonl (absent: nothing); errors as
  // ReadMetricRecords.
  absl::Status Load(Env* env, const std::string& path);

  // Thread-safe.
  absl::Status Write(const metrics::MetricRecord& record) override;
  std::vector<metrics::MetricRecord> Train() const;
  std::vector<metrics::MetricRecord> Eval() const;

 private:
  void Append(std::vector<metrics::MetricRecord>* series, const metrics::MetricRecord& record)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  const size_t max_points_;
  mutable Mutex mu_;
  std::vector<metrics::MetricRecord> train_ ABSL_GUARDED_BY(mu_);
  std::vector<metrics::MetricRecord> eval_ ABSL_GUARDED_BY(mu_);
};

}  // namespace shardline

#endif  // SHARDLINE_COORDINATOR_METRICS_HISTORY_H_
