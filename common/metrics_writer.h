// metrics.jsonl: one JSON object per line, appended, each line written with a
// single write so a reader (or a crash) never sees half a line.
//
//   ASSIGN_OR_RETURN(auto writer, MetricsWriter::Open(env, workdir + "/metrics.jsonl"));
//   RETURN_IF_ERROR(writer->Write(JsonLine().Int("step", 10).Str("split", "train")
//                                     .Num("loss", 0.5)));
#ifndef SHARDLINE_COMMON_METRICS_WRITER_H_
#define SHARDLINE_COMMON_METRICS_WRITER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/env.h"

namespace shardline {

// Builds one flat JSON object, keys in insertion order. Keys are trusted
// identifiers; string values are escaped. Non-finite numbers become null.
class JsonLine {
 public:
  JsonLine& Int(absl::string_view key, int64_t value);
  // Nine significant digits: enough to round-trip a float exactly.
  JsonLine& Num(absl::string_view key, double value);
  JsonLine& Str(absl::string_view key, absl::string_view value);
  // "{...}" without a trailing newline.
  std::string ToString() const { return "{" + body_ + "}"; }

 private:
  void Key(absl::string_view key);
  std::string body_;
};

// Where metric lines go: a file here; the coordinator in a distributed job.
class MetricsSink {
 public:
  virtual ~MetricsSink() = default;
  // Appends one JSON object (no newline inside).
  virtual absl::Status WriteLine(absl::string_view json_object) = 0;
  absl::Status Write(const JsonLine& line) { return WriteLine(line.ToString()); }
};

// Appends lines to a metrics.jsonl file.
class MetricsWriter : public MetricsSink {
 public:
  // Opens `path` for appending (creates it). Earlier lines are kept.
  static absl::StatusOr<std::unique_ptr<MetricsWriter>> Open(Env* env, const std::string& path);
  // Appends the object and a newline. Not thread-safe.
  absl::Status WriteLine(absl::string_view json_object) override;

 private:
  explicit MetricsWriter(std::unique_ptr<WritableFile> file) : file_(std::move(file)) {}
  std::unique_ptr<WritableFile> file_;
};

}  // namespace shardline

#endif  // SHARDLINE_COMMON_METRICS_WRITER_H_
