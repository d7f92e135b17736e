// Test helper: damage a file the way a bad disk or a stray write would.
#ifndef SHARDLINE_TESTS_CORRUPTION_H_
#define SHARDLINE_TESTS_CORRUPTION_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/platform/env.h"

namespace shardline {

// XORs `mask` into the byte at `offset` of `path` (a negative offset counts
// from the end: -1 is the last byte) and writes the file back atomically;
// its size does not change.
inline absl::Status FlipByte(const std::string& path, int64_t offset, uint8_t mask) {
  Env* env = Env::Default();
  absl::StatusOr<std::string> bytes = env->ReadFile(path, kMaxDataFileBytes);
  if (!bytes.ok()) return bytes.status();
  const int64_t size = static_cast<int64_t>(bytes->size());
  const int64_t at = offset < 0 ? size + offset : offset;
  if (at < 0 || at >= size) {
    return absl::OutOfRangeError(absl::StrCat("byte ", offset, " of ", path, ", which has ", size));
  }
  (*bytes)[static_cast<size_t>(at)] = static_cast<char>((*bytes)[static_cast<size_t>(at)] ^ mask);
  return WriteFileAtomically(env, path, *bytes);
}

}  // namespace shardline

#endif  // SHARDLINE_TESTS_CORRUPTION_H_
