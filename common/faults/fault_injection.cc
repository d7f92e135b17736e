#include "common/faults/fault_injection.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace shardline {
namespace {

// The value of environment variable `name`, read once per name and process.
std::string EnvOnce(const char* name) {
  const char* v = std::getenv(name);
  return std::string(v == nullptr ? "" : v);
}

// True the first time any process creates `marker` (O_EXCL): each armed
// fault fires exactly once, and restarted processes go on.
bool FirstToArrive(const std::string& marker) {
  const int fd = open(marker.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd < 0) return false;
  close(fd);
  return true;
}

}  // namespace

void CrashPoint(absl::string_view point, int64_t step) {
  static const std::string spec = EnvOnce("SHARDLINE_CRASH_AT");
  if (spec.empty()) return;
  // Several faults: "<a>,<b>": each crashes once, so a run can meet a
  // second fault while recovering from the first.
  std::string marker;
  for (absl::string_view one : absl::StrSplit(spec, ',')) {
    const std::vector<std::string> parts = absl::StrSplit(one, absl::MaxSplits(':', 2));
    if (parts.size() == 3 && parts[0] == point && (parts[1] == "*" || parts[1] == absl::StrCat(step))) {
      marker = parts[2];
      break;
    }
  }
  if (marker.empty() || !FirstToArrive(marker)) return;
  std::fprintf(stderr, "SHARDLINE_CRASH_AT: killing myself at %s of step %ld\n", std::string(point).c_str(),
               static_cast<long>(step));
  std::fflush(stderr);
  kill(getpid(), SIGKILL);
}

void HangPoint(absl::string_view point) {
  static const std::string spec = EnvOnce("SHARDLINE_HANG_AT");
  if (spec.empty()) return;
  const std::vector<std::string> parts = absl::StrSplit(spec, absl::MaxSplits(':', 1));
  if (parts.size() != 2 || parts[0] != point || !FirstToArrive(parts[1])) return;
  std::fprintf(stderr, "SHARDLINE_HANG_AT: hanging at %s\n", std::string(point).c_str());
  std::fflush(stderr);
  for (;;) pause();
}

}  // namespace shardline
