// `shardline trace merge`: one Chrome/Perfetto trace (the JSON object format,
// {"traceEvents": [...]}) from a job's trace directory - every rank's
// rank-<r>.jsonl and the coordinator's coordinator.jsonl - with one track
// (pid) per process: the coordinator's is 0, rank r's is r + 1, each named.
// Rank events are moved onto the coordinator's clock by the offsets in
// clock_offsets.jsonl (the generation's estimate for that rank; none known:
// left as recorded). Events are sorted by time.
//
//   ASSIGN_OR_RETURN(std::string json, MergeTraces(env, workdir + "/traces"));
#ifndef SHARDLINE_WORKER_TRACE_TRACE_MERGE_H_
#define SHARDLINE_WORKER_TRACE_TRACE_MERGE_H_

#include <string>

#include "absl/status/statusor.h"
#include "common/platform/env.h"

namespace shardline {

// Errors: NOT_FOUND if `dir` holds no rank traces; DATA_LOSS naming the file
// and line of a line that is not a trace event (a torn last line of a
// process that was killed is skipped, with the count in otherData).
absl::StatusOr<std::string> MergeTraces(Env* env, const std::string& dir);

}  // namespace shardline

#endif  // SHARDLINE_WORKER_TRACE_TRACE_MERGE_H_
