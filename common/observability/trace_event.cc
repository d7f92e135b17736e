#include "common/observability/trace_event.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace shardline {
namespace {

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (static_cast<unsigned char>(c) < 0x20) {
      absl::StrAppendFormat(&out, "\\u%04x", static_cast<unsigned char>(c));
    } else {
      out.push_back(c);
    }
  }
  out.push_back('"');
  return out;
}

}  // namespace

std::string RankTraceFile(int rank) { return absl::StrCat("rank-", rank, ".jsonl"); }

bool ParseRankTraceFile(const std::string& name, int* rank) {
  return absl::StartsWith(name, "rank-") && absl::EndsWith(name, ".jsonl") && name.size() > 11 &&
         absl::SimpleAtoi(name.substr(5, name.size() - 11), rank);
}

std::string TraceEventLine(const TraceEvent& e) {
  if (e.kind == TraceEvent::kInstant) {
    return absl::StrCat("{\"name\":", JsonString(e.name), ",\"ph\":\"i\",\"s\":\"p\",\"ts\":", e.ts_micros,
                        ",\"pid\":", e.pid, ",\"tid\":0,\"args\":", e.args_json, "}");
  }
  return absl::StrCat("{\"name\":", JsonString(e.name), ",\"ph\":\"X\",\"ts\":", e.ts_micros, ",\"dur\":",
                      e.dur_micros, ",\"pid\":", e.pid, ",\"tid\":0,\"args\":", e.args_json, "}");
}

}  // namespace shardline
