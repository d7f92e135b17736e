#include "common/metrics_writer.h"

#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"

namespace shardline {

void JsonLine::Key(absl::string_view key) {
  if (!body_.empty()) body_ += ',';
  absl::StrAppend(&body_, "\"", key, "\":");
}

JsonLine& JsonLine::Int(absl::string_view key, int64_t value) {
  Key(key);
  absl::StrAppend(&body_, value);
  return *this;
}

JsonLine& JsonLine::Num(absl::string_view key, double value) {
  Key(key);
  if (!std::isfinite(value)) {
    body_ += "null";
  } else {
    char buf[32];
    snprintf(buf, sizeof(buf), "%.9g", value);
    body_ += buf;
  }
  return *this;
}

JsonLine& JsonLine::Str(absl::string_view key, absl::string_view value) {
  Key(key);
  body_ += '"';
  for (char ch : value) {
    switch (ch) {
      case '"': body_ += "\\\""; break;
      case '\\': body_ += "\\\\"; break;
      case '\n': body_ += "\\n"; break;
      case '\t': body_ += "\\t"; break;
      default:
        if (static_cast<unsigned char>(ch) < 0x20) {
          char buf[8];
          snprintf(buf, sizeof(buf), "\\u%04x", ch);
          body_ += buf;
        } else {
          body_ += ch;
        }
    }
  }
  body_ += '"';
  return *this;
}

absl::StatusOr<std::unique_ptr<MetricsWriter>> MetricsWriter::Open(Env* env,
                                                                   const std::string& path) {
  absl::StatusOr<std::unique_ptr<WritableFile>> file = env->NewAppendableFile(path);
  if (!file.ok()) return file.status();
  return std::unique_ptr<MetricsWriter>(new MetricsWriter(std::move(*file)));
}

absl::Status MetricsWriter::WriteLine(absl::string_view json_object) {
  if (json_object.empty() || json_object.front() != '{' || json_object.back() != '}' ||
      json_object.find('\n') != absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat("not a one-line JSON object: ", json_object.substr(0, 80)));
  }
  return file_->Append(absl::StrCat(json_object, "\n"));
}

}  // namespace shardline
