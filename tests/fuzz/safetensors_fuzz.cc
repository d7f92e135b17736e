// The safetensors header and layout checks (checkpoint.init_from, export).
#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "worker/checkpoint/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)shardline::ParseSafetensors(absl::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
  return 0;
}
