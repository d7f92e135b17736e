#include "common/fault_injection.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace shardline {

void CrashPoint(absl::string_view point, int64_t step) {
  static const std::string spec = [] {
    const char* v = std::getenv("SHARDLINE_CRASH_AT");
    return std::string(v == nullptr ? "" : v);
  }();
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
  if (marker.empty()) return;
  // O_EXCL: exactly one process crashes here, once.
  const int fd = open(marker.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd < 0) return;
  close(fd);
  std::fprintf(stderr, "SHARDLINE_CRASH_AT: killing myself at %s of step %ld\n", std::string(point).c_str(),
               static_cast<long>(step));
  std::fflush(stderr);
  kill(getpid(), SIGKILL);
}

void HangPoint(absl::string_view point) {
  static const std::string spec = [] {
    const char* v = std::getenv("SHARDLINE_HANG_AT");
    return std::string(v == nullptr ? "" : v);
  }();
  if (spec.empty()) return;
  const std::vector<std::string> parts = absl::StrSplit(spec, absl::MaxSplits(':', 1));
  if (parts.size() != 2 || parts[0] != point) return;
  const int fd = open(parts[1].c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd < 0) return;
  close(fd);
  std::fprintf(stderr, "SHARDLINE_HANG_AT: hanging at %s\n", std::string(point).c_str());
  std::fflush(stderr);
  for (;;) pause();
}

}  // namespace shardline
