// Parameters in the safetensors format (huggingface/safetensors), written
// by `shardline ckpt export` and read by checkpoint.init_from:
// an 8-byte little-endian header length, a JSON header mapping each tensor
// name to {"dtype","shape","data_offsets"}, padded with spaces to a multiple
// of 8, then the raw little-endian data. Tensors appear in the order given,
// with no timestamps, so the same parameters always give the same bytes.
#ifndef SHARDLINE_WORKER_CHECKPOINT_SAFETENSORS_H_
#define SHARDLINE_WORKER_CHECKPOINT_SAFETENSORS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/platform/env.h"
#include "proto/train_state.pb.h"
#include "worker/model/flat_layout.h"

namespace shardline {

// The largest header the safetensors spec allows.
inline constexpr int64_t kMaxSafetensorsHeaderBytes = 100'000'000;

// The file contents for `params` (the whole flat buffer) laid out by
// `tensors`; `metadata` goes into "__metadata__" (string to string).
std::string SafetensorsBytes(const std::vector<state::TensorEntry>& tensors, const std::vector<float>& params,
                             const std::map<std::string, std::string>& metadata);
// The same file's first bytes: the length and the JSON header, after which
// each tensor's data follows in the order given (ckpt_export.h streams it).
std::string SafetensorsHeaderBytes(const std::vector<state::TensorEntry>& tensors,
                                   const std::map<std::string, std::string>& metadata);

// One tensor of a parsed safetensors header. Its bytes are
// [data_begin, data_end) of the data section (after the header).
struct SafetensorsTensor {
  std::string dtype;           // "F32", "F16", "I64", ...
  std::vector<int64_t> shape;  // every dimension >= 0
  uint64_t data_begin = 0;
  uint64_t data_end = 0;
};

// A safetensors file's header, checked against the spec: a JSON object
// (parsed by nlohmann-json, so any valid JSON spacing is accepted) whose
// entries other than "__metadata__" (an object of strings) are tensors with a
// known dtype, a shape of non-negative integers and data_offsets
// [begin, end] of non-negative integers with end - begin equal to the
// shape's element count times the dtype's size. The tensors' byte ranges
// must not overlap and must cover the data section exactly. Tensor names are
// unique. Any violation is kDataLoss naming `path` (and the tensor).
struct SafetensorsHeader {
  std::map<std::string, SafetensorsTensor> tensors;
  std::map<std::string, std::string> metadata;
  uint64_t data_offset = 0;  // file offset of the data section: 8 + header length
};
absl::StatusOr<SafetensorsHeader> ParseSafetensors(absl::string_view file_bytes, const std::string& path);

// Reads F32 tensors from a safetensors file into `params` laid out by
// `layout`. The file must pass ParseSafetensors (kDataLoss otherwise); every
// tensor of the layout must be present, F32 and of the same shape
// (kFailedPrecondition naming the file and the tensor otherwise). Other
// tensors in the file are ignored, up to a bound: a file over the largest
// header plus 8 bytes a parameter of `layout` is refused before it is read.
absl::Status ReadSafetensorsInto(Env* env, const std::string& path, const FlatLayout& layout, float* params);

// The same checks on a file mapped (Env::MapFile) instead of read: where
// the file holds the layout's tensors back to back in its order from the
// data's start (as `shardline ckpt export` writes them), `params` points
// into the mapping and the parameters stay page cache, never the process's
// memory (`shardline sample` of a model larger than it wants to hold);
// otherwise they are copied into `copy`. Valid while this lives.
struct MappedParams {
  std::unique_ptr<MappedFile> file;
  std::vector<float> copy;
  const float* params = nullptr;
  std::map<std::string, std::string> metadata;  // the header's "__metadata__"
  bool in_place() const { return file != nullptr; }
};
absl::StatusOr<MappedParams> MapSafetensors(Env* env, const std::string& path, const FlatLayout& layout);

}  // namespace shardline

#endif  // SHARDLINE_WORKER_CHECKPOINT_SAFETENSORS_H_
