// The R data reader (worker/data/rdata.h), as a package's Rdata.rdb reaches
// it: records of zlib streams of R serialisations.
#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "worker/data/rdata.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  shardline::RdataLimits limits;
  limits.max_object_bytes = 1 << 20;
  limits.max_total_bytes = 4 << 20;
  (void)shardline::ReadRdataStrings(bytes, "fuzz.rdb", limits);
  (void)shardline::ParseRSerializedStrings(bytes);
  return 0;
}
