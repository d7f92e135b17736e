// metrics.jsonl: one JSON object per line, appended, each line written with a
// single write so a reader (or a crash) never sees half a line. Lines are
// typed records (proto/metrics.proto) printed by protobuf's JSON printer.
//
//   ASSIGN_OR_RETURN(auto writer, MetricsWriter::Open(env, workdir + "/metrics.jsonl"));
//   metrics::MetricRecord r;
//   r.set_step(10);
//   r.set_split(metrics::MetricRecord::train);
//   r.set_loss(0.5);
//   RETURN_IF_ERROR(writer->Write(r));   // {"step":10,"split":"train","loss":0.5}
#ifndef SHARDLINE_COMMON_OBSERVABILITY_METRICS_WRITER_H_
#define SHARDLINE_COMMON_OBSERVABILITY_METRICS_WRITER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/platform/env.h"
#include "proto/metrics.pb.h"

namespace shardline {

// The record as one JSON object without a trailing newline: keys are the
// field names in field-number order, set fields only; non-finite numbers
// become null.
std::string MetricRecordToJson(const metrics::MetricRecord& record);

// The records of a metrics.jsonl, in order. A last line without its newline
// (a write a crash cut short) is skipped; any other line that is not a
// record is DATA_LOSS naming the file and line.
absl::StatusOr<std::vector<metrics::MetricRecord>> ReadMetricRecords(Env* env, const std::string& path);

// Where metric records go: a file here; the coordinator in a distributed job.
class MetricsSink {
 public:
  virtual ~MetricsSink() = default;
  virtual absl::Status Write(const metrics::MetricRecord& record) = 0;
};

// Hands every record to each of `sinks` in order (the file first, then
// views of it); returns the first error, after trying them all. The sinks
// must outlive the tee.
class MetricsTee : public MetricsSink {
 public:
  explicit MetricsTee(std::vector<MetricsSink*> sinks) : sinks_(std::move(sinks)) {}
  absl::Status Write(const metrics::MetricRecord& record) override {
    absl::Status first;
    for (MetricsSink* sink : sinks_) first.Update(sink->Write(record));
    return first;
  }

 private:
  std::vector<MetricsSink*> sinks_;
};

// Appends records to a metrics.jsonl file.
class MetricsWriter : public MetricsSink {
 public:
  // Opens `path` for appending (creates it). Earlier lines are kept.
  static absl::StatusOr<std::unique_ptr<MetricsWriter>> Open(Env* env, const std::string& path);
  // Appends the record's JSON and a newline. Not thread-safe.
  absl::Status Write(const metrics::MetricRecord& record) override;

 private:
  explicit MetricsWriter(std::unique_ptr<WritableFile> file) : file_(std::move(file)) {}
  std::unique_ptr<WritableFile> file_;
};

}  // namespace shardline

#endif  // SHARDLINE_COMMON_OBSERVABILITY_METRICS_WRITER_H_
