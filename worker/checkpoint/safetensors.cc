#include "worker/checkpoint/safetensors.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace shardline {

std::string SafetensorsBytes(const std::vector<state::TensorEntry>& tensors, const std::vector<float>& params,
                             const std::map<std::string, std::string>& metadata) {
  std::vector<std::string> entries;
  if (!metadata.empty()) {
    std::vector<std::string> kv;
    for (const auto& [k, v] : metadata) kv.push_back(absl::StrCat("\"", k, "\":\"", v, "\""));
    entries.push_back(absl::StrCat("\"__metadata__\":{", absl::StrJoin(kv, ","), "}"));
  }
  int64_t offset = 0;
  std::string data;
  for (const state::TensorEntry& t : tensors) {
    int64_t n = 1;
    for (int64_t d : t.shape()) n *= d;
    const int64_t bytes = n * static_cast<int64_t>(sizeof(float));
    entries.push_back(absl::StrCat("\"", t.name(), "\":{\"dtype\":\"F32\",\"shape\":[", absl::StrJoin(t.shape(), ","),
                                   "],\"data_offsets\":[", offset, ",", offset + bytes, "]}"));
    data.append(reinterpret_cast<const char*>(params.data() + t.offset()), static_cast<size_t>(bytes));
    offset += bytes;
  }
  std::string header = absl::StrCat("{", absl::StrJoin(entries, ","), "}");
  while (header.size() % 8 != 0) header.push_back(' ');
  std::string out(8, '\0');
  const uint64_t len = header.size();
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>(len >> (8 * i));
  out += header;
  out += data;
  return out;
}

namespace {

// The text of the JSON object that follows `"name":` in `header`, or "".
std::string EntryFor(const std::string& header, const std::string& name) {
  const std::string key = absl::StrCat("\"", name, "\":{");
  const size_t at = header.find(key);
  if (at == std::string::npos) return "";
  const size_t end = header.find('}', at);
  return header.substr(at + key.size() - 1, end - at - key.size() + 2);
}

// The integers inside the first [...] after `"field":`.
std::vector<int64_t> IntList(const std::string& entry, const std::string& field) {
  std::vector<int64_t> out;
  const size_t at = entry.find(absl::StrCat("\"", field, "\":["));
  if (at == std::string::npos) return out;
  const size_t close = entry.find(']', at);
  const std::string body = entry.substr(entry.find('[', at) + 1, close - entry.find('[', at) - 1);
  for (absl::string_view v : absl::StrSplit(body, ',', absl::SkipWhitespace())) {
    int64_t x;
    if (absl::SimpleAtoi(absl::StripAsciiWhitespace(v), &x)) out.push_back(x);
  }
  return out;
}

}  // namespace

absl::Status ReadSafetensorsInto(Env* env, const std::string& path, const FlatLayout& layout, float* params) {
  absl::StatusOr<std::string> bytes = env->ReadFile(path);
  if (!bytes.ok()) return bytes.status();
  auto bad = [&](const std::string& what) { return absl::DataLossError(absl::StrCat(path, ": ", what)); };
  if (bytes->size() < 8) return bad("too short for a safetensors file");
  uint64_t len = 0;
  for (int i = 0; i < 8; ++i) len |= static_cast<uint64_t>(static_cast<unsigned char>((*bytes)[static_cast<size_t>(i)])) << (8 * i);
  if (len > bytes->size() - 8) return bad("header length runs past the end of the file");
  const std::string header = bytes->substr(8, len);
  const size_t data = 8 + len;
  for (const TensorInfo& t : layout.tensors()) {
    const std::string entry = EntryFor(header, t.name);
    if (entry.empty()) return absl::FailedPreconditionError(absl::StrCat(path, " has no tensor ", t.name));
    if (entry.find("\"dtype\":\"F32\"") == std::string::npos) return bad(absl::StrCat(t.name, " is not F32"));
    if (IntList(entry, "shape") != t.shape) {
      return absl::FailedPreconditionError(absl::StrCat(path, ": tensor ", t.name, " has another shape than this model's"));
    }
    const std::vector<int64_t> offsets = IntList(entry, "data_offsets");
    if (offsets.size() != 2 || offsets[1] - offsets[0] != t.size * 4 ||
        data + static_cast<uint64_t>(offsets[1]) > bytes->size()) {
      return bad(absl::StrCat("bad data_offsets for ", t.name));
    }
    std::memcpy(params + t.offset, bytes->data() + data + offsets[0], static_cast<size_t>(t.size) * 4);
  }
  return absl::OkStatus();
}

}  // namespace shardline
