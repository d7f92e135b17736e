// How much memory this process may use, as the kernel will enforce it: the
// memory cgroup's limit (cgroup v2 `memory.max`, or v1
// `memory.limit_in_bytes`, of the cgroup /proc/self/cgroup names) and the
// machine's available memory (/proc/meminfo's MemAvailable). Read through
// an Env, so tests hand in the files.
//
//   MemoryBound b = ReadMemoryBound(env);
//   if (b.cgroup_limit > 0) ...   // "cgroup /sys/fs/cgroup/memory/job: 520.0 MiB"
#ifndef SHARDLINE_COMMON_PLATFORM_MEMORY_LIMIT_H_
#define SHARDLINE_COMMON_PLATFORM_MEMORY_LIMIT_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "common/platform/env.h"

namespace shardline {

struct MemoryBound {
  int64_t cgroup_limit = -1;  // bytes; -1: no limit (or none readable)
  std::string cgroup;         // the limit's file, when there is one
  int64_t available = -1;     // MemAvailable bytes; -1: unknown
};

// Never fails: what cannot be read is unknown (-1).
MemoryBound ReadMemoryBound(Env* env);

// Parsers, pure, for tests. The memory controller's path in a
// /proc/self/cgroup text ("" if none): a v1 line "N:memory:/path" (or a
// controller list containing memory), else the v2 line "0::/path".
// `version` is set to 1 or 2.
std::string MemoryCgroupPath(absl::string_view proc_self_cgroup, int* version);
// A limit file's value: bytes, or -1 for "max" and v1's "no limit" (any
// value of 2^62 or more).
int64_t ParseMemoryLimit(absl::string_view text);
// MemAvailable of a /proc/meminfo text, in bytes; -1 if absent.
int64_t ParseMemAvailable(absl::string_view meminfo);

}  // namespace shardline

#endif  // SHARDLINE_COMMON_PLATFORM_MEMORY_LIMIT_H_
