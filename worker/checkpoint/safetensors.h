// Writing parameters in the safetensors format (huggingface/safetensors):
// an 8-byte little-endian header length, a JSON header mapping each tensor
// name to {"dtype","shape","data_offsets"}, padded with spaces to a multiple
// of 8, then the raw little-endian data. Tensors appear in the order given,
// with no timestamps, so the same parameters always give the same bytes.
#ifndef SHARDLINE_WORKER_CHECKPOINT_SAFETENSORS_H_
#define SHARDLINE_WORKER_CHECKPOINT_SAFETENSORS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/env.h"
#include "proto/train_state.pb.h"
#include "worker/model/flat_layout.h"

namespace shardline {

// The file contents for `params` (the whole flat buffer) laid out by
// `tensors`; `metadata` goes into "__metadata__" (string to string).
std::string SafetensorsBytes(const std::vector<state::TensorEntry>& tensors, const std::vector<float>& params,
                             const std::map<std::string, std::string>& metadata);

// Reads F32 tensors from a safetensors file into `params` laid out by
// `layout`: every tensor of the layout must be present with the same shape.
// Errors name the file and the tensor.
absl::Status ReadSafetensorsInto(Env* env, const std::string& path, const FlatLayout& layout, float* params);

}  // namespace shardline

#endif  // SHARDLINE_WORKER_CHECKPOINT_SAFETENSORS_H_
