// The IDX reader (and gunzip in front of it), as Fashion-MNIST files reach it.
#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "worker/data/idx.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  (void)shardline::ParseIdx(bytes, "fuzz");
  absl::StatusOr<std::string> raw = shardline::Gunzip(bytes, "fuzz.gz");
  if (raw.ok()) (void)shardline::ParseIdx(*raw, "fuzz");
  return 0;
}
