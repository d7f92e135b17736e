// Character vectors from an R lazy-load database (the `data/Rdata.rdb` file
// R packages ship their data sets in), read without R.
//
// The file is a run of records, one per object: a 4-byte big-endian length
// (of the object's serialised bytes) and a zlib stream of them. The bytes
// are R's XDR serialisation, format 2 or 3 ("X\n", three big-endian int32
// versions; format 3 adds the native encoding's name); only a character
// vector (STRSXP) is read: its length, then each element as a CHARSXP
// (flags, int32 length, bytes; length -1 is NA). Attributes after the
// elements, if any, are ignored.
//
//   ASSIGN_OR_RETURN(std::string rdb, env->ReadFile(path));
//   ASSIGN_OR_RETURN(std::vector<RStrings> objects, ReadRdataStrings(rdb, path));
#ifndef SHARDLINE_WORKER_DATA_RDATA_H_
#define SHARDLINE_WORKER_DATA_RDATA_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace shardline {

// One character vector; an NA element is read as "" and counted.
struct RStrings {
  std::vector<std::string> strings;
  int64_t na = 0;
};

// Bounds on what one file may make us allocate.
struct RdataLimits {
  int64_t max_object_bytes = int64_t{64} << 20;  // one record, inflated
  int64_t max_total_bytes = int64_t{512} << 20;  // all records, inflated
};

// Every record of `rdb` (the file's bytes), in file order. Any record that
// is not a character vector, a truncated or corrupt stream, or a length past
// the limits fails with an error naming `name` (the path) and the record's
// index and offset.
absl::StatusOr<std::vector<RStrings>> ReadRdataStrings(absl::string_view rdb, absl::string_view name,
                                                       const RdataLimits& limits = RdataLimits{});

// One serialised object (an inflated record) as a character vector.
absl::StatusOr<RStrings> ParseRSerializedStrings(absl::string_view bytes);

}  // namespace shardline

#endif  // SHARDLINE_WORKER_DATA_RDATA_H_
