#include "common/status/progress_line.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"
#include "common/status/status_report.h"

namespace shardline {

std::string StateName(coordinator::JobStatus::State state) {
  if (state == coordinator::JobStatus::STATE_UNSPECIFIED) return "unknown";
  return absl::AsciiStrToLower(coordinator::JobStatus::State_Name(state));
}

std::string ProgressLine(const coordinator::JobStatus& s) {
  std::string eta = "-";
  if (s.steps_per_second() > 0 && s.total_steps() > s.global_step()) {
    eta = FormatEta((s.total_steps() - s.global_step()) / s.steps_per_second());
  }
  const bool has_train = s.has_last_train();
  return absl::StrFormat(
      "progress: step %d/%d | loss %s | %s samples/s | ETA %s | workers %d/%d alive | generation %d | %s",
      s.global_step(), s.total_steps(), has_train ? absl::StrFormat("%.4f", s.last_train().loss()) : "-",
      has_train ? absl::StrFormat("%.0f", s.last_train().samples_per_second()) : "-", eta, s.workers_alive(),
      s.world_size(), s.generation(), StateName(s.state()));
}

}  // namespace shardline
