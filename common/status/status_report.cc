#include "common/status/status_report.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/encoding/text_escape.h"
#include "common/status/goodput_account.h"
#include "common/status/progress_line.h"

namespace shardline {

std::string FormatEta(double seconds) {
  if (seconds < 0 || !std::isfinite(seconds)) return "-";
  const int64_t s = static_cast<int64_t>(seconds);
  if (s >= 3600) return absl::StrFormat("%d:%02d:%02d", s / 3600, s / 60 % 60, s % 60);
  return absl::StrFormat("%d:%02d", s / 60, s % 60);
}

double CheckpointAgeSeconds(const coordinator::JobStatus& s, absl::Time now) {
  return absl::ToDoubleSeconds(now - absl::FromUnixMicros(static_cast<int64_t>(s.last_checkpoint_unix_seconds() * 1e6)));
}

std::string OuterStepLine(const coordinator::OuterStepStatus& o) {
  return absl::StrFormat(
      "islands: %d; %d outer steps, the last at step %d: islands %.4g apart (pseudo-gradient RMS norm), %.2f s "
      "(%.1f s in all), %d bytes sent across islands by rank 0",
      o.islands(), o.outer_steps(), o.step(), o.divergence(), o.seconds(), o.total_seconds(), o.bytes_sent());
}

std::string StatusReport(const coordinator::JobStatus& s, absl::Time now) {
  std::string out;
  const double percent = s.total_steps() > 0 ? 100.0 * s.global_step() / s.total_steps() : 0;
  // Every text from the coordinator goes through EscapeControl: the answer
  // may come from anyone who took its address, and lands on a terminal.
  absl::StrAppendFormat(&out, "job %s  %s  generation %d  step %d/%d (%.1f%%)  ETA %s\n", EscapeControl(s.job_id()),
                        StateName(s.state()), s.generation(), s.global_step(), s.total_steps(), percent,
                        FormatEta(s.eta_seconds()));
  if (!s.error().empty()) absl::StrAppend(&out, "error: ", EscapeControl(s.error()), "\n");
  std::string train = "no train line yet";
  if (s.has_last_train()) {
    train = absl::StrFormat("loss %.4f at step %d, %.0f samples/s", s.last_train().loss(), s.last_train().step(),
                            s.last_train().samples_per_second());
  }
  std::string best = "no eval yet";
  if (s.has_best_eval() && s.best_eval().has_bits_per_byte()) {
    best = absl::StrFormat("%.3f bits per byte (loss %.4f) at step %d", s.best_eval().bits_per_byte(),
                           s.best_eval().loss(), s.best_eval().step());
  } else if (s.has_best_eval()) {
    best = absl::StrFormat("accuracy %.4f (loss %.4f) at step %d", s.best_eval().accuracy(), s.best_eval().loss(),
                           s.best_eval().step());
  }
  absl::StrAppend(&out, train, "; best eval: ", best, "\n");
  if (s.last_checkpoint_step() > 0) {
    absl::StrAppendFormat(&out, "last committed checkpoint: step %d, %.0f s ago\n", s.last_checkpoint_step(),
                          CheckpointAgeSeconds(s, now));
  } else {
    absl::StrAppend(&out, "last committed checkpoint: none\n");
  }
  if (!s.restored_from().empty()) {
    absl::StrAppendFormat(&out, "this world restored step %d from %s; recoveries: %d from memory, %d from disk\n",
                          s.start_step(), EscapeControl(s.restored_from()), s.memory_recoveries(),
                          s.disk_recoveries());
  }
  for (const coordinator::WorldChange& c : s.world_changes()) {
    if (c.from_size() == 0) continue;
    absl::StrAppendFormat(&out, "world: %d -> %d workers at step %d (generation %d): %s\n", c.from_size(), c.to_size(),
                          c.step(), c.generation(), EscapeControl(c.reason()));
  }
  absl::StrAppend(&out, GoodputLine(s.goodput()), "\n");
  absl::StrAppendFormat(&out, "workers: %d of %d alive, %d registered, %d lost so far\n", s.workers_alive(),
                        s.world_size(), s.workers_registered(), s.worker_losses());
  if (!s.last_disruption().empty()) {
    absl::StrAppend(&out, "last disruption: ", EscapeControl(s.last_disruption()), "\n");
  }
  if (!s.checkpoint_note().empty()) {
    absl::StrAppend(&out, "checkpoints: ", EscapeControl(s.checkpoint_note()), "\n");
  }
  if (s.has_outer()) absl::StrAppend(&out, OuterStepLine(s.outer()), "\n");
  if (const std::string numerics = NumericsLine(s); !numerics.empty()) {
    absl::StrAppend(&out, "numerics: ", EscapeControl(numerics), "\n");
  }
  absl::StrAppend(&out, "rank  host:port              alive  heartbeat     step  own work/step  straggler\n");
  for (const coordinator::WorkerStatus& w : s.workers()) {
    absl::StrAppendFormat(&out, "%4d  %-21s  %-5s  %7.2f s  %7d  %10.2f ms  %9s\n", w.rank(), EscapeControl(w.address()),
                          w.finished() ? "done" : w.alive() ? "yes" : "no", w.seconds_since_heartbeat(),
                          w.steps_done(), w.busy_seconds_per_step() * 1e3,
                          w.straggler_score() > 0 ? absl::StrFormat("%.2f", w.straggler_score()) : "-");
  }
  return out;
}

std::string NumericsLine(const coordinator::JobStatus& s) {
  if (!s.has_numerics()) return "";
  const coordinator::NumericsRecord& job = s.numerics();
  std::string line = absl::StrFormat("fingerprint 0x%016x, kernels [%s]", job.numerics().fingerprint(),
                                     job.numerics().kernels());
  for (const coordinator::NumericsRecord& c : s.numerics_changes()) {
    absl::StrAppendFormat(&line, "; from step %d also 0x%016x [%s] (rank %d on %s, runtime.numerics RELAXED): "
                          "bits not comparable with a run on the job's kernels",
                          c.step(), c.numerics().fingerprint(), c.numerics().kernels(), c.rank(), c.host());
  }
  return line;
}

}  // namespace shardline
