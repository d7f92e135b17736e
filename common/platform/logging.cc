#include "common/platform/logging.h"

#include <sys/time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>

#include "absl/base/thread_annotations.h"
#include "common/platform/mutex.h"
#include "common/encoding/text_escape.h"

namespace shardline {
namespace logging {
namespace {

struct State {
  Mutex mu;
  std::string prefix ABSL_GUARDED_BY(mu);
  std::string status_line ABSL_GUARDED_BY(mu);
};

State& GlobalState() {
  static State* state = new State();  // never destroyed: used by exit paths
  return *state;
}

const char* Basename(const char* path) {
  const char* slash = strrchr(path, '/');
  return slash ? slash + 1 : path;
}

}  // namespace

void SetPrefix(absl::string_view prefix) {
  State& s = GlobalState();
  MutexLock lock(&s.mu);
  s.prefix = std::string(prefix);
}

bool StderrIsTerminal() {
  static const bool tty = isatty(STDERR_FILENO) == 1;
  return tty;
}

void SetStatusLine(absl::string_view line) {
  if (!StderrIsTerminal()) return;
  State& s = GlobalState();
  MutexLock lock(&s.mu);
  s.status_line = std::string(line);
  std::string out = "\r\033[K" + s.status_line;
  fwrite(out.data(), 1, out.size(), stderr);
  fflush(stderr);
}

void WriteRaw(absl::string_view line) {
  State& s = GlobalState();
  MutexLock lock(&s.mu);
  std::string out;
  const bool redraw = StderrIsTerminal() && !s.status_line.empty();
  if (redraw) out = "\r\033[K";
  out.append(line.data(), line.size());
  if (redraw) out += s.status_line;
  fwrite(out.data(), 1, out.size(), stderr);
  fflush(stderr);
}

LogMessage::LogMessage(absl::LogSeverity severity, const char* file, int line)
    : severity_(severity) {
  struct timeval tv;
  gettimeofday(&tv, nullptr);
  struct tm tm;
  localtime_r(&tv.tv_sec, &tm);
  char head[64];
  snprintf(head, sizeof(head), "%c%02d%02d %02d:%02d:%02d.%06ld ",
           absl::LogSeverityName(severity)[0], tm.tm_mon + 1, tm.tm_mday,
           tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<long>(tv.tv_usec));
  stream_ << head << Basename(file) << ":" << line << "] ";
  header_bytes_ = static_cast<size_t>(stream_.tellp());
}

LogMessage::~LogMessage() {
  State& s = GlobalState();
  const std::string raw = stream_.str();
  std::string text = raw.substr(0, header_bytes_) + EscapeControl(absl::string_view(raw).substr(header_bytes_), 64 << 10);
  {
    MutexLock lock(&s.mu);
    if (!s.prefix.empty()) {
      size_t bracket = text.find("] ");
      text.insert(bracket + 2, "[" + s.prefix + "] ");
    }
    text += '\n';
  }
  WriteRaw(text);
  if (severity_ == absl::LogSeverity::kFatal) abort();
}

}  // namespace logging
}  // namespace shardline
