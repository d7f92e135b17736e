// A MetricsSink that keeps every record it is given as its metrics.jsonl
// line, for tests to read back.
#ifndef SHARDLINE_TESTS_UTIL_METRIC_LINES_H_
#define SHARDLINE_TESTS_UTIL_METRIC_LINES_H_

#include <string>
#include <vector>

#include "common/observability/metrics_writer.h"

namespace shardline {

class MetricLines : public MetricsSink {
 public:
  absl::Status Write(const metrics::MetricRecord& record) override {
    lines.push_back(MetricRecordToJson(record));
    return absl::OkStatus();
  }
  std::vector<std::string> lines;
};

}  // namespace shardline

#endif  // SHARDLINE_TESTS_UTIL_METRIC_LINES_H_
