#include "common/observability/metrics_writer.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/util/json_util.h"

namespace shardline {

std::string MetricRecordToJson(const metrics::MetricRecord& record) {
  // The printer writes non-finite floats as the strings "NaN"/"Infinity";
  // metrics.jsonl has always written null, which every JSON reader takes.
  metrics::MetricRecord finite = record;
  const google::protobuf::Reflection* reflection = finite.GetReflection();
  const google::protobuf::Descriptor* descriptor = finite.GetDescriptor();
  std::vector<std::string> nulls;
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* f = descriptor->field(i);
    if (f->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_FLOAT || !reflection->HasField(finite, f)) continue;
    if (!std::isfinite(reflection->GetFloat(finite, f))) {
      reflection->SetFloat(&finite, f, 0);
      nulls.push_back(f->name());
    }
  }
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  std::string json;
  // Printing a message with no Any fields cannot fail.
  static_cast<void>(google::protobuf::util::MessageToJsonString(finite, &json, options));
  for (const std::string& name : nulls) {
    const std::string key = absl::StrCat("\"", name, "\":");
    const size_t at = json.find(key);
    const size_t end = json.find_first_of(",}", at);
    json.replace(at + key.size(), end - at - key.size(), "null");
  }
  return json;
}

absl::StatusOr<std::vector<metrics::MetricRecord>> ReadMetricRecords(Env* env, const std::string& path) {
  absl::StatusOr<std::string> text = env->ReadFile(path, kMaxDataFileBytes);
  if (!text.ok()) return text.status();
  std::vector<absl::string_view> lines = absl::StrSplit(*text, '\n');
  std::vector<metrics::MetricRecord> out;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;  // a newer writer's fields
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].empty()) continue;
    metrics::MetricRecord record;
    if (!google::protobuf::util::JsonStringToMessage(std::string(lines[i]), &record, options).ok()) {
      if (i + 1 == lines.size()) break;  // torn last line
      return absl::DataLossError(absl::StrCat(path, ":", i + 1, ": not a metrics record"));
    }
    out.push_back(std::move(record));
  }
  return out;
}

absl::StatusOr<std::unique_ptr<MetricsWriter>> MetricsWriter::Open(Env* env, const std::string& path) {
  absl::StatusOr<std::unique_ptr<WritableFile>> file = env->NewAppendableFile(path);
  if (!file.ok()) return file.status();
  return std::unique_ptr<MetricsWriter>(new MetricsWriter(std::move(*file)));
}

absl::Status MetricsWriter::Write(const metrics::MetricRecord& record) {
  return file_->Append(absl::StrCat(MetricRecordToJson(record), "\n"));
}

}  // namespace shardline
