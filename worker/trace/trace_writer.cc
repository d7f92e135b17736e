#include "worker/trace/trace_writer.h"

#include "absl/strings/str_cat.h"
#include "common/observability/trace_event.h"
#include "common/platform/status_macros.h"

namespace shardline {

std::string PhaseEventLine(const PhaseSpan& span, int rank, int64_t step, uint64_t generation) {
  TraceEvent e;
  e.name = span.name;
  e.ts_micros = span.begin_micros;
  e.dur_micros = span.end_micros - span.begin_micros;
  e.pid = rank;
  e.args_json = absl::StrCat("{\"step\":", step, ",\"generation\":", generation, "}");
  return TraceEventLine(e);
}

absl::StatusOr<std::unique_ptr<TraceWriter>> TraceWriter::Open(Env* env, const std::string& dir, int rank,
                                                               uint64_t generation) {
  RETURN_IF_ERROR(env->CreateDirs(dir));
  ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file,
                   env->NewAppendableFile(dir + "/" + RankTraceFile(rank)));
  return std::unique_ptr<TraceWriter>(new TraceWriter(std::move(file), rank, generation));
}

absl::Status TraceWriter::Write(int64_t step, const std::vector<PhaseSpan>& spans) {
  std::string lines;
  for (const PhaseSpan& span : spans) absl::StrAppend(&lines, PhaseEventLine(span, rank_, step, generation_), "\n");
  RETURN_IF_ERROR(file_->Append(lines));
  return file_->Flush();
}

}  // namespace shardline
