#include "worker/checkpoint/safetensors.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

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

}  // namespace shardline
