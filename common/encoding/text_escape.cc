#include "common/encoding/text_escape.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace shardline {

std::string EscapeControl(absl::string_view text, size_t max_bytes) {
  const size_t kept = std::min(text.size(), max_bytes);
  std::string out;
  out.reserve(kept);
  for (size_t i = 0; i < kept; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      absl::StrAppendFormat(&out, "\\x%02x", c);
    } else if (c == 0xc2 && i + 1 < kept && static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(text[i + 1]) <= 0x9f) {
      absl::StrAppendFormat(&out, "\\u%04x", static_cast<unsigned char>(text[i + 1]));
      ++i;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (kept < text.size()) absl::StrAppend(&out, "...[", text.size() - kept, " more bytes]");
  return out;
}

}  // namespace shardline
