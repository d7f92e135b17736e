// The one format of a job's step traces (docs/operations.md, "Step
// traces"): Chrome trace events, one JSON object per line, in a trace
// directory that holds every rank's rank-<r>.jsonl (its traced steps'
// phases), the coordinator's coordinator.jsonl (generations, commits, the
// job's end) and clock_offsets.jsonl (each rank's clock against the
// coordinator's); `shardline trace merge` joins them into one trace.
// Timestamps are the writing host's wall clock in microseconds.
//
//   TraceEvent e{"forward", TraceEvent::kComplete, begin_us, dur_us, rank, "{\"step\":7}"};
//   file->Append(TraceEventLine(e) + "\n");
#ifndef SHARDLINE_COMMON_OBSERVABILITY_TRACE_EVENT_H_
#define SHARDLINE_COMMON_OBSERVABILITY_TRACE_EVENT_H_

#include <cstdint>
#include <string>

namespace shardline {

inline constexpr char kCoordinatorTraceFile[] = "coordinator.jsonl";
inline constexpr char kClockOffsetsFile[] = "clock_offsets.jsonl";
// "rank-<rank>.jsonl"
std::string RankTraceFile(int rank);
// The rank of a RankTraceFile name; false for any other name.
bool ParseRankTraceFile(const std::string& name, int* rank);

struct TraceEvent {
  enum Kind { kComplete /* "X": ts and dur */, kInstant /* "i", process-scoped */ };
  std::string name;  // escaped as JSON when written
  Kind kind = kComplete;
  int64_t ts_micros = 0;
  int64_t dur_micros = 0;  // kComplete only
  int pid = 0;             // a rank, or the coordinator's track once merged
  std::string args_json = "{}";  // a JSON object, written as it is
};

// The event as one JSON object (no newline):
// {"name":..,"ph":"X","ts":..,"dur":..,"pid":..,"tid":0,"args":{..}}, or
// for an instant {"name":..,"ph":"i","s":"p","ts":..,"pid":..,"tid":0,"args":{..}}.
std::string TraceEventLine(const TraceEvent& event);

}  // namespace shardline

#endif  // SHARDLINE_COMMON_OBSERVABILITY_TRACE_EVENT_H_
