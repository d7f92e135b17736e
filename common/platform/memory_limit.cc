#include "common/platform/memory_limit.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace shardline {

std::string MemoryCgroupPath(absl::string_view proc_self_cgroup, int* version) {
  std::string v2;
  for (absl::string_view line : absl::StrSplit(proc_self_cgroup, '\n', absl::SkipEmpty())) {
    const std::vector<absl::string_view> f = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (f.size() != 3) continue;
    if (f[1].empty() && f[0] == "0") {
      v2 = std::string(f[2]);
      continue;
    }
    for (absl::string_view c : absl::StrSplit(f[1], ',')) {
      if (c == "memory") {
        *version = 1;
        return std::string(f[2]);
      }
    }
  }
  *version = 2;
  return v2;
}

int64_t ParseMemoryLimit(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  int64_t v;
  if (text == "max" || !absl::SimpleAtoi(text, &v) || v <= 0 || v >= (int64_t{1} << 62)) return -1;
  return v;
}

int64_t ParseMemAvailable(absl::string_view meminfo) {
  for (absl::string_view line : absl::StrSplit(meminfo, '\n')) {
    if (!absl::ConsumePrefix(&line, "MemAvailable:")) continue;
    line = absl::StripAsciiWhitespace(line);
    absl::ConsumeSuffix(&line, "kB");
    int64_t kb;
    if (absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &kb)) return kb * 1024;
  }
  return -1;
}

MemoryBound ReadMemoryBound(Env* env) {
  MemoryBound b;
  if (absl::StatusOr<std::string> m = env->ReadFile("/proc/meminfo", kMaxSmallFileBytes); m.ok()) {
    b.available = ParseMemAvailable(*m);
  }
  absl::StatusOr<std::string> self = env->ReadFile("/proc/self/cgroup", kMaxSmallFileBytes);
  if (!self.ok()) return b;
  int version = 0;
  const std::string path = MemoryCgroupPath(*self, &version);
  const std::string base = version == 1 ? "/sys/fs/cgroup/memory" : "/sys/fs/cgroup";
  const std::string file = version == 1 ? "memory.limit_in_bytes" : "memory.max";
  // The tightest limit on the way up: a parent's applies too.
  std::string dir = path;
  while (true) {
    const std::string at = base + (dir == "/" ? "" : dir) + "/" + file;
    if (absl::StatusOr<std::string> t = env->ReadFile(at, kMaxSmallFileBytes); t.ok()) {
      const int64_t limit = ParseMemoryLimit(*t);
      if (limit > 0 && (b.cgroup_limit < 0 || limit < b.cgroup_limit)) {
        b.cgroup_limit = limit;
        b.cgroup = at;
      }
    }
    if (dir.empty() || dir == "/") break;
    const size_t slash = dir.find_last_of('/');
    dir = slash == 0 || slash == std::string::npos ? "/" : dir.substr(0, slash);
  }
  return b;
}

}  // namespace shardline
