#include "worker/checkpoint/safetensors.h"

#include <cstring>

#include <algorithm>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/platform/status_macros.h"

namespace shardline {

std::string SafetensorsBytes(const std::vector<state::TensorEntry>& tensors, const std::vector<float>& params,
                             const std::map<std::string, std::string>& metadata) {
  std::string out = SafetensorsHeaderBytes(tensors, metadata);
  for (const state::TensorEntry& t : tensors) {
    int64_t n = 1;
    for (int64_t d : t.shape()) n *= d;
    out.append(reinterpret_cast<const char*>(params.data() + t.offset()), static_cast<size_t>(n) * sizeof(float));
  }
  return out;
}

std::string SafetensorsHeaderBytes(const std::vector<state::TensorEntry>& tensors,
                                   const std::map<std::string, std::string>& metadata) {
  std::vector<std::string> entries;
  if (!metadata.empty()) {
    std::vector<std::string> kv;
    for (const auto& [k, v] : metadata) kv.push_back(absl::StrCat("\"", k, "\":\"", v, "\""));
    entries.push_back(absl::StrCat("\"__metadata__\":{", absl::StrJoin(kv, ","), "}"));
  }
  int64_t offset = 0;
  for (const state::TensorEntry& t : tensors) {
    int64_t n = 1;
    for (int64_t d : t.shape()) n *= d;
    const int64_t bytes = n * static_cast<int64_t>(sizeof(float));
    entries.push_back(absl::StrCat("\"", t.name(), "\":{\"dtype\":\"F32\",\"shape\":[", absl::StrJoin(t.shape(), ","),
                                   "],\"data_offsets\":[", offset, ",", offset + bytes, "]}"));
    offset += bytes;
  }
  std::string header = absl::StrCat("{", absl::StrJoin(entries, ","), "}");
  while (header.size() % 8 != 0) header.push_back(' ');
  std::string out(8, '\0');
  const uint64_t len = header.size();
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>(len >> (8 * i));
  out += header;
  return out;
}

namespace {

using Json = nlohmann::json;

// Bytes per element of each dtype the spec names.
int DtypeBytes(const std::string& dtype) {
  static const std::map<std::string, int>* const sizes = new std::map<std::string, int>{
      {"BOOL", 1}, {"U8", 1}, {"I8", 1}, {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"I16", 2}, {"U16", 2}, {"F16", 2},
      {"BF16", 2}, {"I32", 4}, {"U32", 4}, {"F32", 4}, {"F64", 8}, {"I64", 8}, {"U64", 8}};
  auto it = sizes->find(dtype);
  return it == sizes->end() ? 0 : it->second;
}

// A non-negative JSON integer (nlohmann stores those as unsigned; negative
// ones and fractions are other types).
bool AsCount(const Json& v, uint64_t* out) {
  if (!v.is_number_unsigned()) return false;
  *out = v.get<uint64_t>();
  return true;
}

// One tensor's entry: a known dtype, a shape of non-negative integers, and
// data_offsets inside the data section covering exactly dtype x shape.
absl::StatusOr<SafetensorsTensor> ParseTensorEntry(const std::string& name, const Json& entry, uint64_t data_bytes,
                                                   const std::string& path) {
  auto bad_tensor = [&](absl::string_view what) {
    return absl::DataLossError(absl::StrCat(path, ": tensor ", name, ": ", what));
  };
  if (!entry.is_object()) return bad_tensor("entry is not an object");
  SafetensorsTensor t;
  const auto dtype = entry.find("dtype");
  if (dtype == entry.end() || !dtype->is_string()) return bad_tensor("no dtype string");
  t.dtype = dtype->get<std::string>();
  const int elem_bytes = DtypeBytes(t.dtype);
  if (elem_bytes == 0) return bad_tensor(absl::StrCat("unknown dtype '", t.dtype, "'"));
  const auto shape = entry.find("shape");
  if (shape == entry.end() || !shape->is_array()) return bad_tensor("no shape array");
  uint64_t elems = 1;
  for (const Json& d : *shape) {
    uint64_t dim;
    if (!AsCount(d, &dim)) return bad_tensor("shape holds something other than a non-negative integer");
    if (dim > data_bytes) return bad_tensor(absl::StrCat("dimension ", dim, " is larger than the file's data"));
    t.shape.push_back(static_cast<int64_t>(dim));
    // Every factor is <= data_bytes, so the product stays below 2^64 as
    // long as it stays <= data_bytes, which is checked each time.
    elems *= dim;
    if (elems > data_bytes) return bad_tensor("more elements than the file has bytes");
  }
  const auto offsets = entry.find("data_offsets");
  if (offsets == entry.end() || !offsets->is_array() || offsets->size() != 2 ||
      !AsCount((*offsets)[0], &t.data_begin) || !AsCount((*offsets)[1], &t.data_end)) {
    return bad_tensor("data_offsets is not two non-negative integers");
  }
  if (t.data_begin > t.data_end || t.data_end > data_bytes) {
    return bad_tensor(absl::StrCat("data_offsets [", t.data_begin, ", ", t.data_end, "] are outside the ",
                                   data_bytes, " data bytes"));
  }
  if (t.data_end - t.data_begin != elems * static_cast<uint64_t>(elem_bytes)) {
    return bad_tensor(absl::StrCat("data_offsets cover ", t.data_end - t.data_begin, " bytes; dtype ", t.dtype,
                                   " and the shape need ", elems * static_cast<uint64_t>(elem_bytes)));
  }
  return t;
}

// The tensors' byte ranges, in order, must tile the data section.
absl::Status CheckTiling(const SafetensorsHeader& h, uint64_t data_bytes, const std::string& path) {
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const auto& [name, t] : h.tensors) ranges.emplace_back(t.data_begin, t.data_end);
  std::sort(ranges.begin(), ranges.end());
  uint64_t covered = 0;
  for (const auto& [begin, end] : ranges) {
    if (begin < covered) return absl::DataLossError(absl::StrCat(path, ": tensors overlap at data byte ", begin));
    if (begin > covered) {
      return absl::DataLossError(absl::StrCat(path, ": data bytes [", covered, ", ", begin, ") belong to no tensor"));
    }
    covered = end;
  }
  if (covered != data_bytes) {
    return absl::DataLossError(absl::StrCat(path, ": data bytes [", covered, ", ", data_bytes, ") belong to no tensor"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SafetensorsHeader> ParseSafetensors(absl::string_view bytes, const std::string& path) {
  auto bad = [&](absl::string_view what) { return absl::DataLossError(absl::StrCat(path, ": ", what)); };
  if (bytes.size() < 8) return bad("too short for a safetensors file (no 8-byte header length)");
  uint64_t len = 0;
  for (int i = 0; i < 8; ++i) len |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[static_cast<size_t>(i)])) << (8 * i);
  if (len > static_cast<uint64_t>(kMaxSafetensorsHeaderBytes)) {
    return bad(absl::StrCat("header length ", len, " is over the spec's ", kMaxSafetensorsHeaderBytes, " bytes"));
  }
  if (len > bytes.size() - 8) {
    return bad(absl::StrCat("header length ", len, " runs past the end of the file (", bytes.size(), " bytes)"));
  }
  const absl::string_view text = bytes.substr(8, len);
  // Duplicate keys are legal JSON that nlohmann would silently collapse;
  // the spec forbids them, so they are caught while parsing.
  std::string duplicate;
  std::set<std::string> seen;
  auto on_event = [&](int depth, Json::parse_event_t event, Json& parsed) {
    if (event == Json::parse_event_t::key && depth == 1 && !seen.insert(parsed.get<std::string>()).second) {
      duplicate = parsed.get<std::string>();
    }
    return true;
  };
  const Json header = Json::parse(text.begin(), text.end(), on_event, /*allow_exceptions=*/false);
  if (header.is_discarded()) return bad("the header is not valid JSON");
  if (!header.is_object()) return bad("the header is not a JSON object");
  if (!duplicate.empty()) return bad(absl::StrCat("tensor ", duplicate, " appears twice in the header"));

  SafetensorsHeader out;
  out.data_offset = 8 + len;
  const uint64_t data_bytes = bytes.size() - out.data_offset;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) return bad("__metadata__ is not an object");
      for (const auto& [k, v] : entry.items()) {
        if (!v.is_string()) return bad(absl::StrCat("__metadata__ value of ", k, " is not a string"));
        out.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    ASSIGN_OR_RETURN(SafetensorsTensor t, ParseTensorEntry(name, entry, data_bytes, path));
    out.tensors[name] = std::move(t);
  }
  RETURN_IF_ERROR(CheckTiling(out, data_bytes, path));
  return out;
}

namespace {

// Each of the layout's tensors in `header`, F32 and of its shape; whether
// all lie back to back in the layout's order from the data's start (then
// the data section is the flat buffer).
absl::StatusOr<bool> CheckLayout(const SafetensorsHeader& header, const std::string& path, const FlatLayout& layout) {
  bool flat = true;
  for (const TensorInfo& info : layout.tensors()) {
    auto it = header.tensors.find(info.name);
    if (it == header.tensors.end()) return absl::FailedPreconditionError(absl::StrCat(path, " has no tensor ", info.name));
    const SafetensorsTensor& t = it->second;
    if (t.dtype != "F32") {
      return absl::FailedPreconditionError(absl::StrCat(path, ": tensor ", info.name, " is ", t.dtype, ", not F32"));
    }
    if (t.shape != info.shape) {
      return absl::FailedPreconditionError(absl::StrCat(path, ": tensor ", info.name,
                                                        " has another shape than this model's"));
    }
    flat = flat && t.data_begin == static_cast<uint64_t>(info.offset) * sizeof(float);
  }
  return flat;
}

void CopyTensors(absl::string_view bytes, const SafetensorsHeader& header, const FlatLayout& layout, float* params) {
  for (const TensorInfo& info : layout.tensors()) {
    const SafetensorsTensor& t = header.tensors.at(info.name);
    // Same shape and dtype, and ParseSafetensors checked the byte count.
    std::memcpy(params + info.offset, bytes.data() + header.data_offset + t.data_begin,
                static_cast<size_t>(info.size) * sizeof(float));
  }
}

}  // namespace

absl::StatusOr<MappedParams> MapSafetensors(Env* env, const std::string& path, const FlatLayout& layout) {
  MappedParams out;
  ASSIGN_OR_RETURN(out.file, env->MapFile(path));
  const absl::string_view bytes = out.file->bytes();
  ASSIGN_OR_RETURN(const SafetensorsHeader header, ParseSafetensors(bytes, path));
  ASSIGN_OR_RETURN(const bool flat, CheckLayout(header, path, layout));
  out.metadata = header.metadata;
  if (flat && header.data_offset % sizeof(float) == 0) {
    out.params = reinterpret_cast<const float*>(bytes.data() + header.data_offset);
    return out;
  }
  out.copy.resize(static_cast<size_t>(layout.total_size()));
  CopyTensors(bytes, header, layout, out.copy.data());
  out.file.reset();
  out.params = out.copy.data();
  return out;
}

absl::Status ReadSafetensorsInto(Env* env, const std::string& path, const FlatLayout& layout, float* params) {
  // The spec bounds the header at 100 MB; the data this model needs is 4
  // bytes a parameter, and room is left for as much again in other tensors.
  const int64_t max_bytes = 8 + kMaxSafetensorsHeaderBytes + 8 * layout.total_size();
  ASSIGN_OR_RETURN(std::string bytes, env->ReadFile(path, max_bytes));
  ASSIGN_OR_RETURN(SafetensorsHeader header, ParseSafetensors(bytes, path));
  RETURN_IF_ERROR(CheckLayout(header, path, layout).status());
  CopyTensors(bytes, header, layout, params);
  return absl::OkStatus();
}

}  // namespace shardline
