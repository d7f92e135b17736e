#include "common/observability/tensorboard_writer.h"

#include <unistd.h>

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "common/encoding/coding.h"
#include "common/encoding/crc32c.h"
#include "common/platform/status_macros.h"
#include "proto/tensorboard.pb.h"
#include "common/platform/clock.h"

namespace shardline {
namespace {

uint32_t MaskedCrc(absl::string_view data) { return crc32c::Mask(crc32c::Value(data.data(), data.size())); }

double WallTime(Env* env) { return absl::ToDoubleSeconds(WallNow(env) - absl::UnixEpoch()); }

absl::StatusOr<std::unique_ptr<WritableFile>> NewEventFile(Env* env, const std::string& dir) {
  RETURN_IF_ERROR(env->CreateDirs(dir));
  char host[256] = "localhost";
  gethostname(host, sizeof(host) - 1);
  const std::string path =
      absl::StrCat(dir, "/events.out.tfevents.", absl::ToUnixSeconds(WallNow(env)), ".", host, ".", getpid());
  ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, env->NewAppendableFile(path));
  tensorboard::Event version;
  version.set_wall_time(WallTime(env));
  version.set_file_version("brain.Event:2");
  RETURN_IF_ERROR(file->Append(TfRecord(version.SerializeAsString())));
  RETURN_IF_ERROR(file->Flush());
  return file;
}

// The record's float fields in field-number order: (name, value).
std::vector<std::pair<std::string, float>> Scalars(const metrics::MetricRecord& record) {
  std::vector<std::pair<std::string, float>> out;
  const google::protobuf::Reflection* reflection = record.GetReflection();
  const google::protobuf::Descriptor* descriptor = record.GetDescriptor();
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* f = descriptor->field(i);
    if (f->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_FLOAT || !reflection->HasField(record, f)) continue;
    out.emplace_back(f->name(), reflection->GetFloat(record, f));
  }
  return out;
}

std::string CsvNumber(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return absl::StrFormat("%.9g", v);  // 9 significant digits round-trip a float
}

}  // namespace

std::string TfRecord(absl::string_view data) {
  std::string out;
  std::string length;
  AppendLittleEndian(&length, data.size(), 8);
  out += length;
  AppendLittleEndian(&out, MaskedCrc(length), 4);
  out.append(data.data(), data.size());
  AppendLittleEndian(&out, MaskedCrc(data), 4);
  return out;
}

absl::StatusOr<std::unique_ptr<TensorBoardWriter>> TensorBoardWriter::Open(Env* env, const std::string& dir) {
  ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> train, NewEventFile(env, dir + "/train"));
  ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> eval, NewEventFile(env, dir + "/eval"));
  return std::unique_ptr<TensorBoardWriter>(new TensorBoardWriter(env, std::move(train), std::move(eval)));
}

absl::Status TensorBoardWriter::Write(const metrics::MetricRecord& record) {
  WritableFile* file = record.split() == metrics::MetricRecord::train  ? train_.get()
                       : record.split() == metrics::MetricRecord::eval ? eval_.get()
                                                                       : nullptr;
  if (file == nullptr || !record.has_step()) return absl::OkStatus();
  tensorboard::Event event;
  event.set_wall_time(WallTime(env_));
  event.set_step(record.step());
  for (const auto& [name, value] : Scalars(record)) {
    tensorboard::Summary::Value* v = event.mutable_summary()->add_value();
    v->set_tag(name);
    v->set_simple_value(value);
  }
  RETURN_IF_ERROR(file->Append(TfRecord(event.SerializeAsString())));
  return file->Flush();
}

namespace {

// A text cell (RFC 4180): as it is, or quoted with its quotes doubled when
// it holds a comma, a quote or a line break.
std::string CsvText(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  return absl::StrCat("\"", absl::StrReplaceAll(text, {{"\"", "\"\""}}), "\"");
}

}  // namespace

std::string CsvMetricsWriter::Header() {
  std::vector<std::string> names;
  const google::protobuf::Descriptor* d = metrics::MetricRecord::descriptor();
  for (int i = 0; i < d->field_count(); ++i) names.push_back(d->field(i)->name());
  return absl::StrJoin(names, ",");
}

absl::StatusOr<std::unique_ptr<CsvMetricsWriter>> CsvMetricsWriter::Open(Env* env, const std::string& path) {
  const bool fresh = !env->FileExists(path) || env->GetFileSize(path).value_or(0) == 0;
  ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, env->NewAppendableFile(path));
  if (fresh) RETURN_IF_ERROR(file->Append(Header() + "\n"));
  return std::unique_ptr<CsvMetricsWriter>(new CsvMetricsWriter(std::move(file)));
}

absl::Status CsvMetricsWriter::Write(const metrics::MetricRecord& record) {
  std::vector<std::string> cells;
  const google::protobuf::Reflection* reflection = record.GetReflection();
  const google::protobuf::Descriptor* d = record.GetDescriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* f = d->field(i);
    if (f->has_presence() && !reflection->HasField(record, f)) {
      cells.emplace_back();
      continue;
    }
    switch (f->cpp_type()) {
      case google::protobuf::FieldDescriptor::CPPTYPE_INT32: cells.push_back(absl::StrCat(reflection->GetInt32(record, f))); break;
      case google::protobuf::FieldDescriptor::CPPTYPE_FLOAT: cells.push_back(CsvNumber(reflection->GetFloat(record, f))); break;
      case google::protobuf::FieldDescriptor::CPPTYPE_ENUM: cells.push_back(reflection->GetEnum(record, f)->name()); break;
      case google::protobuf::FieldDescriptor::CPPTYPE_BOOL:
        cells.push_back(reflection->GetBool(record, f) ? "true" : "false");
        break;
      case google::protobuf::FieldDescriptor::CPPTYPE_STRING: cells.push_back(CsvText(reflection->GetString(record, f))); break;
      default: cells.emplace_back(); break;  // MetricRecord has no other kinds
    }
  }
  return file_->Append(absl::StrCat(absl::StrJoin(cells, ","), "\n"));
}

}  // namespace shardline
