#include "coordinator/trace_log.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "common/observability/trace_event.h"
#include "common/platform/status_macros.h"
#include "common/status/progress_line.h"

namespace shardline {
namespace {

// The coordinator's track is pid 0; rank r's is r + 1 once merged.
constexpr int kCoordinatorPid = 0;

}  // namespace

absl::StatusOr<std::unique_ptr<TraceLog>> TraceLog::Open(Env* env, const std::string& dir) {
  RETURN_IF_ERROR(env->CreateDirs(dir));
  ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> events, env->NewAppendableFile(dir + "/" + kCoordinatorTraceFile));
  ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> offsets, env->NewAppendableFile(dir + "/" + kClockOffsetsFile));
  return std::unique_ptr<TraceLog>(new TraceLog(std::move(events), std::move(offsets)));
}

absl::Status TraceLog::Instant(const std::string& name, absl::Time now, const std::string& args_json) {
  TraceEvent e;
  e.name = name;
  e.kind = TraceEvent::kInstant;
  e.ts_micros = absl::ToUnixMicros(now);
  e.pid = kCoordinatorPid;
  e.args_json = args_json;
  return events_->Append(TraceEventLine(e) + "\n");
}

absl::Status TraceLog::Observe(const coordinator::JobStatus& s, absl::Time now) {
  const bool running = s.state() == coordinator::JobStatus::RUNNING || s.state() == coordinator::JobStatus::STOPPING;
  const bool was_running = state_ == coordinator::JobStatus::RUNNING || state_ == coordinator::JobStatus::STOPPING;
  // A generation's span ends when the world stops running it.
  if (was_running && (!running || s.generation() != generation_)) {
    TraceEvent span;
    span.name = absl::StrCat("generation ", generation_);
    span.ts_micros = absl::ToUnixMicros(generation_start_);
    span.dur_micros = absl::ToInt64Microseconds(now - generation_start_);
    span.pid = kCoordinatorPid;
    span.args_json = absl::StrCat("{\"generation\":", generation_, ",\"ended\":\"", StateName(s.state()), "\"}");
    RETURN_IF_ERROR(events_->Append(TraceEventLine(span) + "\n"));
    if (s.state() == coordinator::JobStatus::FORMING) {
      RETURN_IF_ERROR(Instant("world broke", now, absl::StrCat("{\"generation\":", generation_, "}")));
    }
  }
  if (running && (!was_running || s.generation() != generation_)) {
    generation_start_ = now;
    RETURN_IF_ERROR(Instant("world formed", now, absl::StrCat("{\"generation\":", s.generation(), "}")));
  }
  // The first observation's checkpoint was committed before this process.
  if (s.last_checkpoint_step() != checkpoint_ && s.last_checkpoint_step() > 0 &&
      state_ != coordinator::JobStatus::STATE_UNSPECIFIED) {
    RETURN_IF_ERROR(Instant("checkpoint committed", now, absl::StrCat("{\"step\":", s.last_checkpoint_step(), "}")));
  }
  if ((s.state() == coordinator::JobStatus::DONE || s.state() == coordinator::JobStatus::FAILED) && s.state() != state_) {
    RETURN_IF_ERROR(Instant(absl::StrCat("job ", StateName(s.state())), now, "{}"));
  }
  checkpoint_ = s.last_checkpoint_step();
  state_ = s.state();
  generation_ = s.generation();
  RETURN_IF_ERROR(events_->Flush());

  std::string lines;
  for (const coordinator::WorkerStatus& w : s.workers()) {
    if (w.clock_offset_micros() == 0 && w.steps_done() == 0) continue;  // nothing reported yet
    const auto key = std::make_pair(s.generation(), w.rank());
    auto it = written_offsets_.find(key);
    if (it != written_offsets_.end() && std::llabs(it->second - w.clock_offset_micros()) < kOffsetResolutionMicros) {
      continue;
    }
    written_offsets_[key] = w.clock_offset_micros();
    absl::StrAppend(&lines, "{\"generation\":", s.generation(), ",\"rank\":", w.rank(),
                    ",\"offset_us\":", w.clock_offset_micros(), "}\n");
  }
  if (lines.empty()) return absl::OkStatus();
  RETURN_IF_ERROR(offsets_->Append(lines));
  return offsets_->Flush();
}

}  // namespace shardline
