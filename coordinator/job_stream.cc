// Job: the running world - heartbeat reports in, commands out, streams
// ending, deadlines, requests (stop, checkpoint, eval) and the status.
#include <algorithm>

#include "coordinator/job.h"

#include "absl/strings/str_cat.h"
#include "common/net/listen_address.h"
#include "common/faults/fault_injection.h"
#include "common/platform/clock.h"
#include "common/platform/logging.h"
#include "common/platform/status_macros.h"
#include "common/checkpoint/shard_file.h"
#include "common/encoding/text_escape.h"
#include "common/net/rpc_auth.h"
#include "coordinator/decide/numerics.h"
#include "coordinator/decide/report_check.h"
#include "coordinator/decide/report_rules.h"
#include "coordinator/decide/schedule.h"
#include "coordinator/decide/straggler.h"

namespace shardline {
namespace {

// The other numerics fingerprints RELAXED admits that the world history
// keeps (and the status shows).
constexpr int kMaxNumericsChanges = 100;

}  // namespace

uint64_t Job::CommandVersionLocked() {
  // Each input of NextCommand's answer, folded: any change changes it.
  uint64_t v = state_version_;
  for (uint64_t x : {static_cast<uint64_t>(m_.state), static_cast<uint64_t>(finished_durable_), m_.generation,
                     static_cast<uint64_t>(stop_at_),
                     static_cast<uint64_t>(checkpoint_at_), static_cast<uint64_t>(eval_at_), m_.evictions}) {
    v = v * 1000003u ^ x;
  }
  return v;
}

void Job::AwaitCommandNews(uint64_t* seen, absl::Duration timeout) {
  MutexLock lock(&mu_);
  auto changed = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return CommandVersionLocked() != *seen; };
  mu_.AwaitWithTimeout(absl::Condition(&changed), timeout);
  *seen = CommandVersionLocked();
}

absl::Status Job::Report(const coordinator::WorkerReport& r) {
  Deferred later;
  absl::Status accepted;
  {
    MutexLock lock(&mu_);
    accepted = ReportLocked(r, &later);
  }
  RunDeferred(std::move(later));
  return accepted;
}

absl::Status Job::CheckReportLocked(const coordinator::WorkerReport& r) {
  if (r.generation() != m_.generation || m_.members.count(r.rank()) == 0) {
    return absl::FailedPreconditionError(absl::StrCat("report from rank ", r.rank(), " of generation ",
                                                      r.generation(), "; the job is at generation ",
                                                      m_.generation));
  }
  if (!SecretEquals(r.member_secret(), m_.members[r.rank()].secret)) {
    return absl::PermissionDeniedError(absl::StrCat("report for rank ", r.rank(), " of generation ", r.generation(),
                                                    " does not come from the worker that registered it"));
  }
  ReportLimits limits;
  limits.world_size = m_.world_size;
  RETURN_IF_ERROR(CheckReport(r, limits, ShardFileName(r.rank(), m_.world_size)));
  if (r.bad_checkpoint_step() > 0 && !catalog_.IsRestorePoint(r.bad_checkpoint_step())) {
    return absl::InvalidArgumentError(absl::StrCat("report from rank ", r.rank(), " refused: bad_checkpoint_step ",
                                                   r.bad_checkpoint_step(), " is not a checkpoint handed out"));
  }
  return absl::OkStatus();
}

void Job::NoteProgressLocked(const coordinator::WorkerReport& r) {
  StepLocked(membership_event::Heard{r.rank(), r.steps_done()});
  WorldMember& m = m_.members[r.rank()];  // a report changes no membership but this member's
  furthest_step_ = std::max(furthest_step_, m.steps_done);
  if (r.has_time()) m.time = r.time();
  if (r.busy_seconds_per_step() > 0) m.busy_seconds_per_step = r.busy_seconds_per_step();
  if (r.sent_unix_micros() > 0) {
    const int64_t offset = r.sent_unix_micros() - options_.env->NowUnixMicros();
    // sent - received = offset - latency: the largest is the closest.
    if (!m.clock_offset_micros.has_value() || offset > *m.clock_offset_micros) m.clock_offset_micros = offset;
  }
  if (r.total_steps() > 0) total_steps_ = r.total_steps();
  if (r.rank() == 0 && r.has_outer()) outer_ = r.outer();
  if (r.rank() == 0) rate_ = NextStepRate(rate_, m.steps_done, Now());
}

// Memory first, so the next world is handed the fallback; the mark is made
// durable after the lock is released. Only the first report of a step acts.
void Job::BadCheckpointLocked(const coordinator::WorkerReport& r, Deferred* later) {
  if (r.bad_checkpoint_step() <= 0) return;
  book_event::BadCheckpoint e;
  e.step = r.bad_checkpoint_step();
  e.rank = r.rank();
  e.why = r.bad_checkpoint_reason();
  e.first = catalog_.NoteBad(e.step);
  const RestorePoint fallback = catalog_.Restore();
  e.fallback_step = fallback.step;
  e.fallback_dir = fallback.dir;
  e.root = catalog_.root();
  BookStepLocked(e, later);
}

void Job::NoteMetricsLocked(const coordinator::WorkerReport& r) {
  if (metrics_ != nullptr) {  // written after mu_, in order
    pending_records_.insert(pending_records_.end(), r.metrics().begin(), r.metrics().end());
  }
  evals_ = NoteEvals(std::move(evals_), r.metrics(), config_.checkpoint());
}

bool Job::NumericsAcceptedLocked(const coordinator::WorkerReport& r) {
  NumericsSource source;
  source.rank = r.rank();
  source.host = ListenHost(m_.members[r.rank()].address);
  source.step = start_step_;
  source.generation = m_.generation;
  source.unix_seconds = absl::ToDoubleSeconds(WallNow(options_.env) - absl::UnixEpoch());
  // The kernels are the worker's text: kept, logged and shown escaped
  // (CheckReport bounded their size).
  coordinator::Numerics reported = r.numerics();
  reported.set_kernels(EscapeControl(reported.kernels(), 1024));
  const NumericsVerdict v = JudgeNumerics(history_, reported, source, config_.runtime().numerics());
  switch (v.action) {
    case NumericsVerdict::kAccept:
      return true;
    case NumericsVerdict::kRecordJobs:
      SLOG(INFO) << v.reason;
      *history_.mutable_numerics() = v.record;
      break;
    case NumericsVerdict::kRecordChange:
      SLOG(WARNING) << v.reason;
      // The first changes tell from which step the bits are not comparable;
      // past kMaxNumericsChanges (a host whose every start computes anew)
      // they are logged, not kept.
      if (history_.numerics_changes_size() >= kMaxNumericsChanges) return true;
      *history_.add_numerics_changes() = v.record;
      break;
    case NumericsVerdict::kRefuse:
      Fail(absl::FailedPreconditionError(v.reason));
      return false;
  }
  history_dirty_ = true;
  ++state_version_;  // made durable by the report's PersistState
  if (metrics_ != nullptr && v.record.step() <= INT32_MAX) {
    metrics::MetricRecord line;
    line.set_split(metrics::MetricRecord::numerics);
    line.set_step(static_cast<int32_t>(v.record.step()));
    line.set_generation(static_cast<int32_t>(std::min<uint64_t>(v.record.generation(), INT32_MAX)));
    line.set_fingerprint(FingerprintHex(v.record.numerics().fingerprint()));
    line.set_kernels(v.record.numerics().kernels());
    line.set_rank(v.record.rank());
    line.set_admitted(v.action == NumericsVerdict::kRecordChange);
    pending_records_.push_back(std::move(line));  // written by the report's PersistState
  }
  return true;
}

absl::Status Job::ReportLocked(const coordinator::WorkerReport& r, Deferred* later) {
  RETURN_IF_ERROR(CheckReportLocked(r));
  // Before anything the report carries: a worker on other kernels has none
  // of its shards booked (its numerics come before any shard it saves).
  if (r.has_numerics() && !NumericsAcceptedLocked(r)) return absl::OkStatus();
  NoteProgressLocked(r);
  // CheckReport has checked each shard's world size and file name.
  if (!options_.checkpoint_root.empty()) {
    for (const coordinator::SavedShard& saved : r.saved()) {
      BookStepLocked(book_event::ShardSaved{r.rank(), saved, m_.world_size}, later);
    }
  }
  BadCheckpointLocked(r, later);
  NoteMetricsLocked(r);
  if (r.save_failed_step() > 0) {
    book_event::SaveFailed e;
    e.step = r.save_failed_step();
    e.generation = r.generation();
    e.rank = r.rank();
    e.code = static_cast<absl::StatusCode>(r.save_failure_code());
    e.failure = r.save_failure();
    e.kept_dir = catalog_.Restore().dir;
    e.root = catalog_.root();
    BookStepLocked(e, later);
  }
  if (BadSnapshotVerdict bad = JudgeBadSnapshot(r.rank(), r.bad_memory_step(), snapshot_step_, bad_memory_steps_);
      bad.break_world) {
    bad_memory_steps_.insert(snapshot_step_);
    SLOG(ERROR) << "the in-memory snapshot of step " << snapshot_step_ << " could not be restored on rank " << r.rank()
                << "; the next world restores from another snapshot or from disk";
    StepLocked(membership_event::Break{std::move(bad.why)});
  }
  if (!r.left_reason().empty()) {
    StepLocked(membership_event::Left{r.rank(), EscapeControl(r.left_reason(), 1024)});
  }
  if (!r.fatal_error().empty()) {
    if (r.diverged_step() > 0) ++nonfinite_losses_;
    Fail(absl::FailedPreconditionError(absl::StrCat("worker rank ", r.rank(), ": ", r.fatal_error())));
  } else if (!r.watchdog().empty()) {
    StepLocked(membership_event::Watchdog{r.rank(), r.watchdog()});
  } else if (r.finished()) {
    StepLocked(membership_event::Finished{r.rank()});
  }
  return absl::OkStatus();
}

bool Job::StreamOver(int rank, uint64_t generation) {
  // A finished job is told only once it is durably finished: a worker that
  // hears "done" exits, and a coordinator restarted then must know.
  if (m_.state == JobState::kDone) return finished_durable_;
  if (m_.state == JobState::kFailed || m_.state == JobState::kForming || generation != m_.generation) {
    return true;
  }
  auto it = m_.members.find(rank);
  return it == m_.members.end() || it->second.evicted;
}

std::optional<coordinator::CoordinatorCommand> Job::NextCommand(int rank, uint64_t generation,
                                                                const coordinator::CoordinatorCommand& last,
                                                                absl::Duration wait, bool* end) {
  MutexLock lock(&mu_);
  auto news = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return StreamOver(rank, generation) || stop_at_ != last.stop_at() || checkpoint_at_ != last.checkpoint_at() ||
           eval_at_ != last.eval_at();
  };
  mu_.AwaitWithTimeout(absl::Condition(&news), wait);
  *end = StreamOver(rank, generation);
  coordinator::CoordinatorCommand c;
  if (*end) {
    auto it = m_.members.find(rank);
    const bool evicted = it != m_.members.end() && it->second.evicted && generation == m_.generation;
    if (m_.state == JobState::kFailed || evicted) return std::nullopt;
    if (m_.state == JobState::kDone && generation == m_.generation) {
      c.set_job_done(true);
      return c;
    }
    // The world moved on: tell the worker which generation to join.
    c.set_new_generation(m_.state == JobState::kForming ? m_.generation + 1 : m_.generation);
    return c;
  }
  if (stop_at_ == last.stop_at() && checkpoint_at_ == last.checkpoint_at() && eval_at_ == last.eval_at()) {
    return std::nullopt;
  }
  c.set_stop_at(stop_at_);
  c.set_checkpoint_at(checkpoint_at_);
  c.set_eval_at(eval_at_);
  return c;
}

void Job::StreamEnded(int rank, uint64_t generation, bool broken) {
  {
    MutexLock lock(&mu_);
    StepLocked(membership_event::StreamEnded{rank, generation, broken});
  }
  PersistState();
}

bool Job::AwaitsJobEnd(int rank, uint64_t generation) {
  MutexLock lock(&mu_);
  auto it = m_.members.find(rank);
  return generation == m_.generation && it != m_.members.end() && it->second.finished;
}

void Job::RestartHeartbeatDeadlines(absl::Duration stalled) {
  MutexLock lock(&mu_);
  if (StepLocked(membership_event::RestartDeadlines{}).deadlines_restarted) {
    SLOG(WARNING) << "the coordinator did not run for " << absl::FormatDuration(stalled)
                  << "; every worker's heartbeat deadline starts again now";
  }
}

void Job::CheckHeartbeats() {
  {
    MutexLock lock(&mu_);
    StepLocked(membership_event::Tick{});
  }
  PersistState();
}

void Job::RequestStop(const std::string& why) {
  MutexLock lock(&mu_);
  const MembershipEffects out = StepLocked(membership_event::Stop{});
  if (out.stopped_forming) SLOG(INFO) << why << ": stopping; no world is running";
  if (!out.stop_scheduled) return;
  stop_at_ = StepAheadLocked();
  SLOG(INFO) << why << ": every worker stops after step " << stop_at_;
  CrashPoint("stop_scheduled", stop_at_);
}

int64_t Job::StepAheadLocked() {
  return StepAhead(m_.FurthestStep(), rate_.per_second, total_steps_);
}

void Job::MaybeRequestCheckpoint() {
  MutexLock lock(&mu_);
  if (options_.checkpoint_root.empty() || m_.state != JobState::kRunning) return;
  if (!PeriodicSaveDue(Now(), last_save_time_, config_.checkpoint().every_seconds())) return;
  ScheduleCheckpointLocked("checkpoint.every_seconds");
}

void Job::ScheduleCheckpointLocked(const char* why) {
  checkpoint_at_ = StepAheadLocked();
  last_save_time_ = Now();  // checkpoint.every_seconds counts from here; the commit moves it again
  SLOG(INFO) << why << ": every worker saves after step " << checkpoint_at_;
}

absl::Status Job::RequestCheckpoint() {
  MutexLock lock(&mu_);
  if (options_.checkpoint_root.empty()) return absl::FailedPreconditionError("checkpoint now: the job saves no checkpoints");
  if (m_.state != JobState::kRunning) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint now: no world is running (", JobStateName(m_.state), ")"));
  }
  ScheduleCheckpointLocked("checkpoint requested");
  return absl::OkStatus();
}

void Job::RequestEval() {
  MutexLock lock(&mu_);
  if (m_.state != JobState::kRunning) return;
  eval_at_ = StepAheadLocked();
  SLOG(INFO) << "eval requested: every worker evaluates after step " << eval_at_;
}

bool Job::AwaitEnd(absl::Duration wait) {
  MutexLock lock(&mu_);
  auto over = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return (m_.state == JobState::kDone && finished_durable_) || m_.state == JobState::kFailed;
  };
  return mu_.AwaitWithTimeout(absl::Condition(&over), wait);
}

int64_t Job::FinishedAtStart() {
  MutexLock lock(&mu_);
  return finished_at_start_ ? std::max<int64_t>(finished_step_, 1) : 0;
}

absl::Status Job::final_status() {
  MutexLock lock(&mu_);
  return final_;
}

coordinator::JobStatus Job::Snapshot() {
  MutexLock lock(&mu_);
  coordinator::JobStatus s;
  s.set_state(ToProto(m_.state));
  s.set_job_id(job_id_);
  s.set_generation(m_.generation);
  s.set_global_step(m_.GlobalStep());
  s.set_total_steps(total_steps_);
  s.set_last_disruption(last_disruption_);
  s.set_world_size(m_.world_size > 0 ? m_.world_size : options_.world_size);
  s.set_target_world_size(options_.world_size);
  *s.mutable_world_changes() = history_.changes();
  if (history_.has_numerics()) *s.mutable_numerics() = history_.numerics();
  *s.mutable_numerics_changes() = history_.numerics_changes();
  const bool forming = m_.state == JobState::kForming;
  s.set_workers_registered(static_cast<int>(forming ? m_.pending.size() : m_.members.size()));
  int alive = 0;
  for (const auto& [rank, m] : m_.members) alive += (!forming && m.attached) ? 1 : 0;
  s.set_workers_alive(alive);
  s.set_worker_losses(losses_);
  s.set_last_checkpoint_step(catalog_.latest_good());
  s.set_bad_checkpoints(catalog_.bad_count());
  s.set_checkpoint_failures(checkpoints_.failures);
  s.set_checkpoint_note(checkpoints_.reason);
  if (outer_.has_value()) *s.mutable_outer() = *outer_;
  s.set_start_step(start_step_);
  s.set_restored_from(snapshot_step_ > 0 ? "memory" : start_step_ > 0 ? "disk" : "");
  s.set_memory_recoveries(memory_recoveries_);
  s.set_disk_recoveries(disk_recoveries_);
  s.set_steps_redone(steps_redone_);
  s.set_nonfinite_losses(nonfinite_losses_);
  s.set_last_checkpoint_unix_seconds(absl::ToDoubleSeconds(last_commit_time_ - absl::UnixEpoch()));
  s.set_steps_per_second(rate_.per_second);
  if (evals_.last_train.has_step()) *s.mutable_last_train() = evals_.last_train;
  if (evals_.last_eval.has_step()) *s.mutable_last_eval() = evals_.last_eval;
  if (evals_.best_eval.has_step()) *s.mutable_best_eval() = evals_.best_eval;
  if (!final_.ok()) s.set_error(std::string(final_.message()));
  const absl::Time now = Now();
  for (const auto& [rank, m] : forming ? m_.pending : m_.members) {
    coordinator::WorkerStatus* w = s.add_workers();
    w->set_rank(rank);
    w->set_address(m.address);
    w->set_alive(!forming && m.attached);
    w->set_seconds_since_heartbeat(forming ? 0 : absl::ToDoubleSeconds(now - m.last_seen));
    w->set_steps_done(m.steps_done);
    w->set_busy_seconds_per_step(m.busy_seconds_per_step);
    *w->mutable_time() = m.time;
    w->set_clock_offset_micros(m.clock_offset_micros.value_or(0));
    w->set_finished(m.finished);
  }
  ScoreStragglers(s.mutable_workers());
  const int64_t left = total_steps_ - s.global_step();
  s.set_eta_seconds(rate_.per_second > 0 && total_steps_ > 0 ? static_cast<double>(left) / rate_.per_second : -1);
  return s;
}

}  // namespace shardline
