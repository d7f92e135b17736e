#include "coordinator/metrics_history.h"


namespace shardline {

absl::Status MetricsHistory::Load(Env* env, const std::string& path) {
  if (!env->FileExists(path)) return absl::OkStatus();
  absl::StatusOr<std::vector<metrics::MetricRecord>> records = ReadMetricRecords(env, path);
  if (!records.ok()) return records.status();
  for (const metrics::MetricRecord& r : *records) static_cast<void>(Write(r));
  return absl::OkStatus();
}

void MetricsHistory::Append(std::vector<metrics::MetricRecord>* series, const metrics::MetricRecord& record) {
  series->push_back(record);
  if (series->size() <= max_points_) return;
  // Thin by half, keeping the newest point.
  std::vector<metrics::MetricRecord> kept;
  for (size_t i = series->size() % 2 == 0 ? 1 : 0; i < series->size(); i += 2) kept.push_back((*series)[i]);
  *series = std::move(kept);
}

absl::Status MetricsHistory::Write(const metrics::MetricRecord& record) {
  MutexLock lock(&mu_);
  if (record.split() == metrics::MetricRecord::train) Append(&train_, record);
  if (record.split() == metrics::MetricRecord::eval) Append(&eval_, record);
  return absl::OkStatus();
}

std::vector<metrics::MetricRecord> MetricsHistory::Train() const {
  MutexLock lock(&mu_);
  return train_;
}

std::vector<metrics::MetricRecord> MetricsHistory::Eval() const {
  MutexLock lock(&mu_);
  return eval_;
}

}  // namespace shardline
