#include "worker/trace/trace_writer.h"

#include "absl/strings/str_cat.h"
#include "common/platform/status_macros.h"

namespace shardline {

std::string TraceEventLine(const PhaseSpan& span, int rank, int64_t step, uint64_t generation) {
  // Span names are string literals of [a-z_]: nothing to escape.
  return absl::StrCat("{\"name\":\"", span.name, "\",\"ph\":\"X\",\"ts\":", span.begin_micros,
                      ",\"dur\":", span.end_micros - span.begin_micros, ",\"pid\":", rank,
                      ",\"tid\":0,\"args\":{\"step\":", step, ",\"generation\":", generation, "}}");
}

absl::StatusOr<std::unique_ptr<TraceWriter>> TraceWriter::Open(Env* env, const std::string& dir, int rank,
                                                               uint64_t generation) {
  RETURN_IF_ERROR(env->CreateDirs(dir));
  ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file,
                   env->NewAppendableFile(absl::StrCat(dir, "/rank-", rank, ".jsonl")));
  return std::unique_ptr<TraceWriter>(new TraceWriter(std::move(file), rank, generation));
}

absl::Status TraceWriter::Write(int64_t step, const std::vector<PhaseSpan>& spans) {
  std::string lines;
  for (const PhaseSpan& span : spans) absl::StrAppend(&lines, TraceEventLine(span, rank_, step, generation_), "\n");
  RETURN_IF_ERROR(file_->Append(lines));
  return file_->Flush();
}

}  // namespace shardline
