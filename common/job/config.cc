#include "common/job/config.h"


#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/platform/status_macros.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"

namespace shardline {
namespace {

namespace pb = google::protobuf;

class CollectErrors : public pb::io::ErrorCollector {
 public:
  explicit CollectErrors(absl::string_view source) : source_(source) {}
  void AddError(int line, int column, const std::string& message) override {
    errors_.push_back(absl::StrCat(source_, ":", line + 1, ":", column + 1, ": ", message));
  }
  void AddWarning(int line, int column, const std::string& message) override {
    AddError(line, column, message);
  }
  std::string Joined() const { return absl::StrJoin(errors_, "\n"); }

 private:
  std::string source_;
  std::vector<std::string> errors_;
};

std::string FieldNames(const pb::Descriptor* d) {
  std::vector<std::string> names;
  for (int i = 0; i < d->field_count(); ++i) names.push_back(d->field(i)->name());
  return absl::StrJoin(names, ", ");
}

// An enum's value names but the 0th (UNSPECIFIED), comma-separated.
std::string EnumNames(const pb::EnumDescriptor* e) {
  std::vector<std::string> names;
  for (int i = 1; i < e->value_count(); ++i) names.push_back(e->value(i)->name());
  return absl::StrJoin(names, ", ");
}

// "--set PATH: 'TEXT' is not WANT (field type T)": a value that does not
// fit its field.
absl::Status NotA(const pb::FieldDescriptor* f, absl::string_view text, const std::string& path,
                  absl::string_view want) {
  return absl::InvalidArgumentError(
      absl::StrCat("--set ", path, ": '", text, "' is not ", want, " (field type ", f->type_name(), ")"));
}

// A message field from text: "{}" or "{a: 1 b: 2}" (or the fields bare).
absl::Status SetMessage(const pb::FieldDescriptor* f, absl::string_view text, pb::Message* msg,
                        const std::string& path) {
  absl::string_view body = text;
  if (absl::ConsumePrefix(&body, "{") && !absl::ConsumeSuffix(&body, "}")) {
    return NotA(f, text, path, "a message in braces, e.g. {} or {a: 1}");
  }
  const pb::Reflection* r = msg->GetReflection();
  pb::Message* sub = f->is_repeated() ? r->AddMessage(msg, f) : r->MutableMessage(msg, f);
  pb::TextFormat::Parser parser;
  CollectErrors errors(absl::StrCat("--set ", path));
  parser.RecordErrorsTo(&errors);
  sub->Clear();
  if (!parser.ParseFromString(std::string(body), sub)) return absl::InvalidArgumentError(errors.Joined());
  return absl::OkStatus();
}

absl::Status SetScalar(const pb::FieldDescriptor* f, absl::string_view text,
                       pb::Message* msg, const std::string& path) {
  const pb::Reflection* r = msg->GetReflection();
  const bool rep = f->is_repeated();
  text = absl::StripAsciiWhitespace(text);
  auto bad = [&](absl::string_view want) { return NotA(f, text, path, want); };
  switch (f->cpp_type()) {
    case pb::FieldDescriptor::CPPTYPE_INT32: {
      int32_t v;
      if (!absl::SimpleAtoi(text, &v)) return bad("an integer");
      rep ? r->AddInt32(msg, f, v) : r->SetInt32(msg, f, v);
      break;
    }
    case pb::FieldDescriptor::CPPTYPE_INT64: {
      int64_t v;
      if (!absl::SimpleAtoi(text, &v)) return bad("an integer");
      rep ? r->AddInt64(msg, f, v) : r->SetInt64(msg, f, v);
      break;
    }
    case pb::FieldDescriptor::CPPTYPE_UINT32: {
      uint32_t v;
      if (!absl::SimpleAtoi(text, &v)) return bad("a non-negative integer");
      rep ? r->AddUInt32(msg, f, v) : r->SetUInt32(msg, f, v);
      break;
    }
    case pb::FieldDescriptor::CPPTYPE_UINT64: {
      uint64_t v;
      if (!absl::SimpleAtoi(text, &v)) return bad("a non-negative integer");
      rep ? r->AddUInt64(msg, f, v) : r->SetUInt64(msg, f, v);
      break;
    }
    case pb::FieldDescriptor::CPPTYPE_FLOAT: {
      float v;
      if (!absl::SimpleAtof(text, &v)) return bad("a number");
      rep ? r->AddFloat(msg, f, v) : r->SetFloat(msg, f, v);
      break;
    }
    case pb::FieldDescriptor::CPPTYPE_DOUBLE: {
      double v;
      if (!absl::SimpleAtod(text, &v)) return bad("a number");
      rep ? r->AddDouble(msg, f, v) : r->SetDouble(msg, f, v);
      break;
    }
    case pb::FieldDescriptor::CPPTYPE_BOOL: {
      bool v;
      if (!absl::SimpleAtob(text, &v)) return bad("true or false");
      rep ? r->AddBool(msg, f, v) : r->SetBool(msg, f, v);
      break;
    }
    case pb::FieldDescriptor::CPPTYPE_STRING: {
      std::string v(text);
      if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'') && v.back() == v.front()) {
        v = v.substr(1, v.size() - 2);
      }
      rep ? r->AddString(msg, f, v) : r->SetString(msg, f, v);
      break;
    }
    case pb::FieldDescriptor::CPPTYPE_ENUM: {
      const pb::EnumValueDescriptor* v =
          f->enum_type()->FindValueByName(absl::AsciiStrToUpper(text));
      if (v == nullptr || v->number() == 0) return bad(absl::StrCat("one of ", EnumNames(f->enum_type())));
      rep ? r->AddEnum(msg, f, v) : r->SetEnum(msg, f, v);
      break;
    }
    case pb::FieldDescriptor::CPPTYPE_MESSAGE:
      return SetMessage(f, text, msg, path);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<config::JobConfig> ParseConfigText(absl::string_view text,
                                                  absl::string_view source) {
  config::JobConfig cfg;
  pb::TextFormat::Parser parser;
  CollectErrors errors(source);
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(std::string(text), &cfg)) {
    return absl::InvalidArgumentError(absl::StrCat("invalid config: ", errors.Joined()));
  }
  return cfg;
}

absl::Status ApplyOverride(absl::string_view assignment, config::JobConfig* cfg) {
  const size_t eq = assignment.find('=');
  if (eq == absl::string_view::npos || eq == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--set expects a.b.c=value, got '", assignment, "'"));
  }
  const std::string path(absl::StripAsciiWhitespace(assignment.substr(0, eq)));
  const absl::string_view value = assignment.substr(eq + 1);
  std::vector<std::string> parts = absl::StrSplit(path, '.');
  pb::Message* msg = cfg;
  std::string walked;
  for (size_t i = 0; i < parts.size(); ++i) {
    const pb::Descriptor* d = msg->GetDescriptor();
    const pb::FieldDescriptor* f = d->FindFieldByName(parts[i]);
    if (f == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--set ", path, ": unknown field '", parts[i], "' in ",
          walked.empty() ? "the job config" : walked, " (", d->full_name(),
          " has: ", FieldNames(d), ")"));
    }
    walked = walked.empty() ? parts[i] : absl::StrCat(walked, ".", parts[i]);
    const bool last = i + 1 == parts.size();
    if (last) {
      if (f->is_repeated()) {
        msg->GetReflection()->ClearField(msg, f);
        absl::string_view list = absl::StripAsciiWhitespace(value);
        absl::ConsumePrefix(&list, "[");
        absl::ConsumeSuffix(&list, "]");
        if (absl::StripAsciiWhitespace(list).empty()) return absl::OkStatus();
        for (absl::string_view item : absl::StrSplit(list, ',')) {
          RETURN_IF_ERROR(SetScalar(f, item, msg, path));
        }
        return absl::OkStatus();
      }
      return SetScalar(f, value, msg, path);
    }
    if (f->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE || f->is_repeated()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--set ", path, ": '", walked, "' is a ", f->type_name(),
          ", not a message, so it has no field '", parts[i + 1], "'"));
    }
    msg = msg->GetReflection()->MutableMessage(msg, f);
  }
  return absl::OkStatus();
}


absl::Status CheckConfigPaths(Env* env, const config::JobConfig& c) {
  if (c.data().has_tokens()) {
    const std::string manifest = absl::StrCat(c.data().tokens().dir(), "/manifest.json");
    if (!env->FileExists(manifest)) {
      return absl::NotFoundError(absl::StrCat("config field data.tokens.dir: ", manifest,
                                              " does not exist (`shardline data tokenize ... --out DIR` writes it "
                                              "last, when every shard is done)"));
    }
    return absl::OkStatus();
  }
  if (c.data().has_text()) {
    for (const auto& [field, path] : {std::pair<const char*, std::string>{"train_path", c.data().text().train_path()},
                                      {"val_path", c.data().text().val_path()}}) {
      if (!env->FileExists(path)) {
        return absl::NotFoundError(absl::StrCat("config field data.text.", field, ": file ", path,
                                                " does not exist (`shardline data austen --out DIR` writes "
                                                "DIR/train.txt and DIR/val.txt)"));
      }
    }
    return absl::OkStatus();
  }
  if (!env->IsDirectory(c.data().dir())) {
    return absl::NotFoundError(absl::StrCat(
        "config field data.dir: directory ", c.data().dir(),
        " does not exist (install Debian's dataset-fashion-mnist package or point "
        "data.dir at the IDX files)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<config::JobConfig> LoadConfig(Env* env, const std::string& path,
                                             const std::vector<std::string>& overrides,
                                             bool check_paths) {
  absl::StatusOr<std::string> text = env->ReadFile(path, kMaxConfigFileBytes);
  if (!text.ok()) return Annotate(text.status(), "reading config file");
  ASSIGN_OR_RETURN(config::JobConfig cfg, ParseConfigText(*text, path));
  const bool file_valid = overrides.empty() || ValidateConfig(cfg).ok();
  for (const std::string& o : overrides) RETURN_IF_ERROR(ApplyOverride(o, &cfg));
  absl::Status valid = ValidateConfig(cfg);
  if (!valid.ok()) {
    // Blame what made it invalid: the file, or (when the file alone is
    // valid) the --set overrides on it.
    return Annotate(valid, file_valid && !overrides.empty()
                               ? absl::StrCat("invalid config: --set ", absl::StrJoin(overrides, " --set "), " on ", path)
                               : absl::StrCat("invalid config ", path));
  }
  if (check_paths) RETURN_IF_ERROR(CheckConfigPaths(env, cfg));
  return cfg;
}

std::string ConfigToText(const config::JobConfig& config) {
  std::string out;
  pb::TextFormat::PrintToString(config, &out);
  return out;
}

}  // namespace shardline
