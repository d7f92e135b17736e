// Text that came from the network or from another process, made safe to
// print: in a log line, a terminal, or `shardline status`.
//
//   SLOG(WARNING) << "refused " << EscapeControl(req.transport_address());
//
// Every log line goes through EscapeControl (common/platform/logging.cc), so a
// newline in a field cannot forge a line and an ANSI escape cannot reach
// the operator's terminal.
#ifndef SHARDLINE_COMMON_ENCODING_TEXT_ESCAPE_H_
#define SHARDLINE_COMMON_ENCODING_TEXT_ESCAPE_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace shardline {

// How much of one piece of text a log line or a report shows.
inline constexpr size_t kMaxPrintedTextBytes = 16 << 10;

// `text` with every control byte (C0, DEL, and C1 encoded as UTF-8, which
// some terminals obey too) written as a visible escape: "\n", "\r", "\t",
// "\x1b", "\u009b". Other UTF-8 passes unchanged. Past `max_bytes` of
// `text` the rest is dropped and "...[N more bytes]" says how much.
std::string EscapeControl(absl::string_view text, size_t max_bytes = kMaxPrintedTextBytes);

}  // namespace shardline

#endif  // SHARDLINE_COMMON_ENCODING_TEXT_ESCAPE_H_
