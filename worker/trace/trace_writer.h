// A worker's step traces (train.trace_steps): each traced step's phases,
// appended as Chrome trace events (one JSON object per line) to
// <trace_dir>/rank-<rank>.jsonl. `shardline trace merge` joins every rank's
// file and the coordinator's into one trace (docs/operations.md, "Step
// traces"). Timestamps are this host's wall clock in microseconds; the merge
// aligns them on the coordinator's clock.
//
//   ASSIGN_OR_RETURN(auto writer, TraceWriter::Open(env, dir, rank, generation));
//   writer->Write(step, spans);  // after a traced step
#ifndef SHARDLINE_WORKER_TRACE_TRACE_WRITER_H_
#define SHARDLINE_WORKER_TRACE_TRACE_WRITER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/platform/env.h"
#include "worker/train/phase_timer.h"

namespace shardline {

// A phase as one event line (common/observability/trace_event.h): a
// complete event on the rank's track, args {"step":..,"generation":..}.
std::string PhaseEventLine(const PhaseSpan& span, int rank, int64_t step, uint64_t generation);

class TraceWriter {
 public:
  // Creates `dir` if needed and opens the rank's file for appending (a
  // restarted rank adds to it).
  static absl::StatusOr<std::unique_ptr<TraceWriter>> Open(Env* env, const std::string& dir, int rank,
                                                           uint64_t generation);
  // Appends the step's spans (one write) and flushes. Not thread-safe.
  absl::Status Write(int64_t step, const std::vector<PhaseSpan>& spans);

 private:
  TraceWriter(std::unique_ptr<WritableFile> file, int rank, uint64_t generation)
      : file_(std::move(file)), rank_(rank), generation_(generation) {}
  std::unique_ptr<WritableFile> file_;
  const int rank_;
  const uint64_t generation_;
};

}  // namespace shardline

#endif  // SHARDLINE_WORKER_TRACE_TRACE_WRITER_H_
