// Process-wide logging: one line per message, written with a single fwrite to
// stderr so lines from concurrent threads never interleave, and so a parent
// process (the launcher) can prefix and tee them.
//
//   SLOG(INFO) << "step " << step << " loss " << loss;
//   SLOG(FATAL) << "cannot happen";   // logs, then aborts
//
// We use this small header instead of glog/spdlog: Debian 12's Abseil has no
// absl/log, and one line per fwrite plus a redrawable status line is all the
// project needs. Format: "I1121 21:05:24.123456 file.cc:42] [prefix] message".
#ifndef SHARDLINE_COMMON_PLATFORM_LOGGING_H_
#define SHARDLINE_COMMON_PLATFORM_LOGGING_H_

#include <sstream>
#include <string>

#include "absl/base/log_severity.h"
#include "absl/strings/string_view.h"

namespace shardline {
namespace logging {

// Sets a tag printed on every line, e.g. "worker 1". Thread-safe.
void SetPrefix(absl::string_view prefix);

// Sets the live status line (progress). On a terminal it is redrawn below
// the log lines with '\r'; elsewhere it is not printed. Empty clears it.
void SetStatusLine(absl::string_view line);

// Writes an already formatted line (ending in '\n') to stderr in one piece,
// keeping the status line below it.
void WriteRaw(absl::string_view line);

// True when stderr is a terminal.
bool StderrIsTerminal();

class LogMessage {
 public:
  LogMessage(absl::LogSeverity severity, const char* file, int line);
  // Writes the line, its message through EscapeControl (one line, no
  // control bytes, at most 64 KiB); aborts after a kFatal message.
  ~LogMessage();
  std::ostream& stream() { return stream_; }

 private:
  absl::LogSeverity severity_;
  std::ostringstream stream_;
  size_t header_bytes_ = 0;  // the time and place that open the line
};

}  // namespace logging
}  // namespace shardline

#define SHARDLINE_SEVERITY_INFO ::absl::LogSeverity::kInfo
#define SHARDLINE_SEVERITY_WARNING ::absl::LogSeverity::kWarning
#define SHARDLINE_SEVERITY_ERROR ::absl::LogSeverity::kError
#define SHARDLINE_SEVERITY_FATAL ::absl::LogSeverity::kFatal

#define SLOG(severity)                                                   \
  ::shardline::logging::LogMessage(SHARDLINE_SEVERITY_##severity,        \
                                   __FILE__, __LINE__)                   \
      .stream()

// Internal invariant: aborts with the condition text when it is false.
#define SCHECK(cond) \
  if (!(cond)) SLOG(FATAL) << "Check failed: " #cond " "

#endif  // SHARDLINE_COMMON_PLATFORM_LOGGING_H_
