#include "coordinator/job.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/checkpoint/checkpoint_dir.h"
#include "common/job/config.h"
#include "common/faults/fault_injection.h"
#include "common/job/best_eval.h"
#include "common/platform/logging.h"
#include "common/net/rpc_auth.h"
#include "common/encoding/text_escape.h"
#include "common/platform/status_macros.h"
#include "coordinator/report_check.h"
#include "coordinator/restore_plan.h"
#include "coordinator/schedule.h"
#include "coordinator/straggler.h"
#include "common/topology/peer_set.h"
#include "common/platform/clock.h"

namespace shardline {
namespace {

constexpr char kJobIdKey[] = "job_id";
constexpr char kGenerationKey[] = "generation";
constexpr char kGlobalStepKey[] = "global_step";
constexpr char kWorldHistoryKey[] = "world_history";
// Written (synced) once every worker has finished, before any is told: the
// config text the job finished with, and the step, "<step>\n<config>". A
// coordinator started again with the same config finds the job over.
constexpr char kFinishedKey[] = "finished";
// World changes kept in the store and the status (the newest).
constexpr int kMaxWorldChanges = 100;

// True if `record` beats `best` (unset: anything beats it) by the one
// best-eval rule (common/job/best_eval.h).
bool IsBetterEval(const metrics::MetricRecord& record, const metrics::MetricRecord& best,
                  const config::CheckpointConfig& policy) {
  if (!best.has_step()) return true;
  return BeatsBest(policy, BestMetricValue(policy, {record.loss(), record.accuracy(), record.bits_per_byte()}),
                   BestMetricValue(policy, {best.loss(), best.accuracy(), best.bits_per_byte()}));
}

// Registrations are logged one by one in worlds up to this size; in larger
// ones only the first and the last of each forming world.
constexpr int kLoggedRegistrations = 64;

coordinator::RegisterResponse JobOver(const absl::Status& final_status) {
  coordinator::RegisterResponse over;
  over.set_job_over(true);
  over.set_job_error(std::string(final_status.message()));
  return over;
}

MembershipConfig MembershipConfigFor(const config::JobConfig& config, const CoordinatorOptions& options) {
  MembershipConfig c;
  c.slots = options.world_size;
  c.min_workers = config.runtime().min_workers();
  c.replace_timeout = absl::Seconds(config.runtime().replace_timeout_seconds());
  c.heartbeat_timeout = options.heartbeat_timeout;
  c.saves_checkpoints = !options.checkpoint_root.empty();
  return c;
}

}  // namespace

coordinator::JobStatus::State ToProto(JobState state) {
  switch (state) {
    case JobState::kForming: return coordinator::JobStatus::FORMING;
    case JobState::kRunning: return coordinator::JobStatus::RUNNING;
    case JobState::kStopping: return coordinator::JobStatus::STOPPING;
    case JobState::kDone: return coordinator::JobStatus::DONE;
    case JobState::kFailed: return coordinator::JobStatus::FAILED;
  }
  return coordinator::JobStatus::STATE_UNSPECIFIED;
}

Job::Job(config::JobConfig config, JobStore* store, MetricsSink* metrics, CoordinatorOptions options)
    : config_(std::move(config)),
      config_text_(ConfigToText(config_)),
      store_(store),
      metrics_(metrics),
      options_(options),
      membership_config_(MembershipConfigFor(config_, options)),
      catalog_(store, CatalogOptions{options.checkpoint_root, options.env, config_.checkpoint()}),
      writer_(options.disk_thread ? std::make_unique<DiskWriter>(DiskWriterOptions{}) : nullptr) {}

absl::Status Job::Init() {
  // Read and written before anything can call in, and outside mu_: the
  // synced writes hold no lock an RPC needs. The results are taken under
  // it at the end.
  std::string job_id;
  ASSIGN_OR_RETURN(std::optional<std::string> id, store_->Get(kJobIdKey));
  if (id.has_value()) {
    job_id = *id;
  } else {
    job_id = NewJobId();
    RETURN_IF_ERROR(store_->Put(kJobIdKey, job_id, /*sync=*/true));
  }
  uint64_t generation = 0;
  ASSIGN_OR_RETURN(std::optional<std::string> gen, store_->Get(kGenerationKey));
  if (gen.has_value() && !absl::SimpleAtoi(*gen, &generation)) {
    return absl::DataLossError(absl::StrCat("job store: generation '", *gen, "' is not a number"));
  }
  coordinator::WorldHistory history;
  ASSIGN_OR_RETURN(std::optional<std::string> history_bytes, store_->Get(kWorldHistoryKey));
  if (history_bytes.has_value() && !history.ParseFromString(*history_bytes)) {
    return absl::DataLossError("job store: the world history does not parse");
  }
  std::optional<int64_t> finished_step;
  ASSIGN_OR_RETURN(std::optional<std::string> finished, store_->Get(kFinishedKey));
  if (finished.has_value()) {
    const size_t newline = finished->find('\n');
    int64_t step = 0;
    if (newline == std::string::npos || !absl::SimpleAtoi(finished->substr(0, newline), &step)) {
      return absl::DataLossError("job store: the finished record does not parse");
    }
    // The same job again: over. Another config (say, more steps) on the
    // same workdir is a new run that resumes from the last checkpoint.
    if (finished->substr(newline + 1) == config_text_) {
      finished_step = step;
    } else {
      RETURN_IF_ERROR(store_->Delete(kFinishedKey, /*sync=*/true));
    }
  }
  RETURN_IF_ERROR(catalog_.Init(job_id));
  {
    MutexLock lock(&mu_);
    job_id_ = job_id;
    m_.stop_requested = options_.stop_requested;
    m_.generation = generation;
    durable_generation_ = m_.generation;
    if (history.changes_size() > 0) m_.size_before_start = history.changes(history.changes_size() - 1).to_size();
    history_ = std::move(history);
    last_commit_time_ = WallNow();
    m_.forming_since = Now();
    if (finished_step.has_value()) {
      m_.state = JobState::kDone;  // set before any event: the store says so
      final_ = absl::OkStatus();
      finished_durable_ = true;
      finished_at_start_ = true;
      finished_step_ = *finished_step;
    }
    SLOG(INFO) << "job " << job_id_ << ": world of " << options_.world_size
               << (elastic() ? absl::StrCat(" (elastic: at least ", config_.runtime().min_workers(), ")") : "")
               << ", last generation " << m_.generation << ", latest committed checkpoint at step "
               << catalog_.latest_good();
  }
  return absl::OkStatus();
}

void Job::ShardSaved(int rank, const coordinator::SavedShard& saved, Deferred* later) {
  // CheckReport has checked the shard's world size and file name.
  if (options_.checkpoint_root.empty()) return;
  auto& shards = saves_[saved.step()];
  shards[rank] = saved;
  if (static_cast<int>(shards.size()) < m_.world_size) return;
  later->commits.push_back(Commit{saved.step(), m_.world_size, std::move(shards)});
  ++commits_pending_;  // until RunDeferredNow has tried it
  saves_.erase(saved.step());
}

void Job::RunDeferred(Deferred later, bool wait) {
  if (writer_ == nullptr || writer_->OnWriterThread()) {
    RunDeferredNow(later);
    return;
  }
  const bool nothing = later.commits.empty() && later.bad_step == 0;
  if (nothing) {
    PersistState();
  } else {
    auto task = std::make_shared<const Deferred>(std::move(later));
    if (!writer_->Submit([this, task] { RunDeferredNow(*task); })) {
      // A full queue (a disk stalled for long): commits are never dropped;
      // this caller waits for the disk instead.
      SLOG(WARNING) << "the coordinator's disk queue is full; committing on the caller's thread";
      RunDeferredNow(*task);
    }
  }
  if (wait && !nothing) writer_->Drain();
}

void Job::RunDeferredNow(const Deferred& later) {
  for (const Commit& c : later.commits) {
    absl::Status committed = catalog_.Commit(c.step, c.world, job_id_, c.shards);
    MutexLock lock(&mu_);
    --commits_pending_;
    if (!committed.ok()) {
      SLOG(ERROR) << "checkpoint at step " << c.step << " not committed: " << committed;
      ++checkpoint_failures_;
      continue;
    }
    last_save_time_ = Now();
    last_commit_time_ = WallNow();
    StepLocked(membership_event::Committed{c.step});
  }
  if (later.bad_step > 0) {
    absl::Status marked = catalog_.PersistBad(later.bad_step, later.bad_reason);
    if (!marked.ok()) {
      MutexLock lock(&mu_);
      Fail(Annotate(marked, "marking a checkpoint bad"));
    }
  }
  PersistAndWriteNow();
  if (writer_ != nullptr) CompleteRegistrations();  // what waited for this
}

void Job::PersistState() {
  if (writer_ == nullptr || writer_->OnWriterThread()) {
    PersistAndWriteNow();
    return;
  }
  {
    MutexLock lock(&mu_);
    if (persist_queued_) return;  // the queued one covers this change
    persist_queued_ = true;
  }
  const bool queued = writer_->Submit([this] {
    {
      MutexLock lock(&mu_);
      persist_queued_ = false;
    }
    PersistAndWriteNow();
    CompleteRegistrations();  // those waiting for a durable generation
  });
  if (!queued) {
    {
      MutexLock lock(&mu_);
      persist_queued_ = false;
    }
    PersistAndWriteNow();
  }
}

void Job::PersistAndWriteNow() {
  PersistStateNow();
  WriteRecords();
}

void Job::WriteRecords() {
  // One writer at a time, so records reach the files in the order decided.
  MutexLock persist(&persist_mu_);
  std::vector<metrics::MetricRecord> records;
  {
    MutexLock lock(&mu_);
    records.swap(pending_records_);
  }
  if (metrics_ == nullptr) return;
  for (const metrics::MetricRecord& record : records) {
    absl::Status written = metrics_->Write(record);
    if (!written.ok()) {
      MutexLock lock(&mu_);
      Fail(Annotate(written, "writing metrics.jsonl"));
      return;
    }
  }
}

void Job::PersistStateNow() {
  MutexLock persist(&persist_mu_);
  uint64_t generation, version;
  int64_t step;
  std::optional<std::string> history;
  bool finished, completed;
  {
    MutexLock lock(&mu_);
    // The job's end is recorded (and so told) only once every commit
    // decided before it is on disk: the final checkpoint's commit is
    // queued with the last report, and a persist queued by another thread
    // may run first. The commit's own persist records the end then.
    finished = m_.state == JobState::kDone && !finished_durable_ && commits_pending_ == 0;
    if (state_version_ == persisted_version_ && !finished) return;
    generation = m_.generation;
    step = m_.GlobalStep();
    version = state_version_;
    if (history_dirty_) history = history_.SerializeAsString();
    history_dirty_ = false;
    if (finished) step = std::max(step, furthest_step_);
    // Only a job that reached its last step is over for good; one stopped
    // gracefully resumes when run again with the same config.
    completed = finished && total_steps_ > 0 && step >= total_steps_;
  }
  absl::Status s = absl::OkStatus();
  if (history.has_value()) s = store_->Put(kWorldHistoryKey, *history, /*sync=*/false);
  if (s.ok()) s = store_->Put(kGenerationKey, absl::StrCat(generation), /*sync=*/true);
  if (s.ok()) s = store_->Put(kGlobalStepKey, absl::StrCat(step), /*sync=*/true);
  if (s.ok() && completed) s = store_->Put(kFinishedKey, absl::StrCat(step, "\n", config_text_), /*sync=*/true);
  if (s.ok() && finished) CrashPoint("after_finished_record", step);
  MutexLock lock(&mu_);
  if (!s.ok() && finished) {
    // No worker was told: the job did not durably finish. Every checkpoint
    // is committed; a run again finds the final one.
    final_ = Annotate(s, "recording that every worker finished");
    m_.state = JobState::kFailed;  // done in memory only: not an event, a correction
    SLOG(ERROR) << "job failed: " << final_;
    return;
  }
  if (!s.ok()) {
    Fail(Annotate(s, "persisting the generation"));
    return;
  }
  persisted_version_ = version;
  durable_generation_ = std::max(durable_generation_, generation);
  if (finished) {
    finished_durable_ = true;
    finished_step_ = step;
  }
}

absl::Time Job::Now() const { return absl::FromUnixMicros(options_.env->NowMicros()); }

void Job::SaveFailed(const coordinator::WorkerReport& r) {
  ++checkpoint_failures_;
  std::set<uint64_t>& generations = save_failures_[r.save_failed_step()];
  generations.insert(r.generation());
  const int attempts = static_cast<int>(generations.size());
  if (attempts < kMaxSaveAttempts) {
    SLOG(ERROR) << "saving the checkpoint at step " << r.save_failed_step() << " failed on rank " << r.rank() << " ("
                << r.save_failure() << "); attempt " << attempts << " of " << kMaxSaveAttempts
                << ", the world restarts from the last committed checkpoint";
    return;
  }
  // The same save failing again and again (a full or broken disk) would
  // restart the world forever: stop, keeping what was committed.
  const RestorePoint kept = catalog_.Restore();
  Fail(absl::ResourceExhaustedError(absl::StrCat(
      "saving the checkpoint at step ", r.save_failed_step(), " failed in ", attempts,
      " generations (last on rank ", r.rank(), ": ", r.save_failure(), "); stopping rather than retrying it without "
      "end. Every committed checkpoint is kept (", kept.dir.empty() ? std::string("none yet") : "newest: " + kept.dir,
      "); free space in or repair ", catalog_.root(), ", then run again to resume")));
}

void Job::Fail(absl::Status status) {
  if (m_.Over()) return;
  SLOG(ERROR) << "job failed: " << status;
  final_ = std::move(status);
  StepLocked(membership_event::Fail{});
}

MembershipEffects Job::StepLocked(const MembershipEvent& event) {
  MembershipEffects out = Step(membership_config_, m_, event, Now());
  if (out.broken.has_value()) OnBrokenLocked(*out.broken);
  if (out.formed.has_value()) OnFormedLocked(*out.formed);
  if (out.lost_while_forming.has_value()) SLOG(WARNING) << *out.lost_while_forming;
  if (out.short_of_workers.has_value()) {
    SLOG(WARNING) << out.short_of_workers->have << " of " << options_.world_size << " workers registered after "
                  << absl::FormatDuration(out.short_of_workers->waited) << "; runtime.min_workers is "
                  << config_.runtime().min_workers() << ": waiting for "
                  << config_.runtime().min_workers() - out.short_of_workers->have << " more";
  }
  if (out.wants_checkpoint && config_.checkpoint().every_steps() <= 0 &&
      config_.checkpoint().every_seconds() <= 0 && checkpoint_at_ == 0) {
    checkpoint_at_ = StepAheadLocked();  // none is planned: ask for one
    SLOG(INFO) << "every worker saves after step " << checkpoint_at_ << ", where the world grows";
  }
  if (out.every_worker_finished) {
    final_ = absl::OkStatus();
    ++state_version_;
    // The furthest step reported: after a partition a member's count can
    // lag its own finished report (it was "step 0").
    SLOG(INFO) << "every worker finished at step " << furthest_step_;
    CrashPoint("every_worker_finished", furthest_step_);
  }
  if (out.stopped_forming) final_ = absl::OkStatus();
  return out;
}

void Job::OnFormedLocked(const MembershipEffects::Formed& formed) {
  const absl::Time now = Now();
  stop_at_ = 0;  // set below once start_step_ is known, if stopping
  checkpoint_at_ = 0;
  eval_at_ = 0;
  last_save_time_ = now;
  memory_step_ = PlanMemoryRestore();
  const int64_t disk_step = catalog_.Restore().step;
  start_step_ = memory_step_ > 0 ? memory_step_ : disk_step;
  // Retention never deletes the checkpoint this world restored from.
  if (memory_step_ == 0) catalog_.Pin(disk_step);
  // A world formed during a graceful stop (a worker or the coordinator was
  // lost in it) stops too: after its first step, which it saves. Every
  // member learns the step in its registration response, so all agree.
  if (m_.stop_requested) stop_at_ = total_steps_ > 0 ? std::min(total_steps_, start_step_ + 1) : start_step_ + 1;
  const int64_t redo = std::max<int64_t>(0, furthest_step_ - start_step_);
  steps_redone_ += redo;
  if (redo > 0) {
    SLOG(INFO) << "generation " << m_.generation << " redoes " << redo << " steps (the furthest step reached was "
               << furthest_step_ << ")";
  }
  if (memory_step_ > 0) {
    ++memory_recoveries_;
    std::string moves;
    for (int r = 0; r < static_cast<int>(memory_sources_.size()); ++r) {
      if (memory_sources_[r] != r || memory_world_ != m_.world_size) {
        absl::StrAppend(&moves, moves.empty() ? "" : ", ", "shard ", r, " from rank ", memory_sources_[r]);
      }
    }
    SLOG(INFO) << "generation " << m_.generation << " restores step " << memory_step_ << " from the workers' memory ("
               << (memory_world_ != m_.world_size ? absl::StrCat("resharded from a world of ", memory_world_, ": ") : "")
               << (moves.empty() ? std::string("every rank holds its own shard") : moves)
               << "); no checkpoint is read" << (disk_step > 0 ? absl::StrCat("; disk has step ", disk_step) : "");
  } else if (disk_step > 0) {
    ++disk_recoveries_;
    SLOG(INFO) << "generation " << m_.generation << " restores step " << disk_step << " from disk";
  }
  rate_steps_ = 0;
  rate_time_ = now;
  ++state_version_;  // made durable by the caller, outside the lock
  SLOG(INFO) << "generation " << m_.generation << " formed: " << m_.members.size() << " workers"
             << (stop_at_ > 0 ? absl::StrCat("; a graceful stop is under way: every worker stops after step ", stop_at_)
                              : std::string());
  CrashPoint("world_formed", start_step_);
  const int previous = formed.previous_size;
  if (previous > 0 && m_.world_size < previous) CrashPoint("world_shrunk", start_step_);
  if (previous > 0 && m_.world_size > previous) CrashPoint("world_grown", start_step_);
  if (previous != m_.world_size) RecordWorldChangeLocked(previous, formed.why);
}

void Job::OnBrokenLocked(const MembershipEffects::Broken& broken) {
  if (broken.planned) {
    CrashPoint("growing", broken.grow_step);
    SLOG(INFO) << "generation " << m_.generation << " ends: " << broken.why;
  } else {
    SLOG(WARNING) << "generation " << m_.generation << " broken: " << broken.why << "; waiting for "
                  << options_.world_size << " workers to register"
                  << (elastic() ? absl::StrCat(" (or ", config_.runtime().min_workers(), " after ",
                                               config_.runtime().replace_timeout_seconds(), " s)")
                                : "");
    ++losses_;
    last_disruption_ = broken.why;
  }
  saves_.clear();  // a partial save of the broken world is never committed
  // Members learn the new generation from NextCommand; their old streams
  // then end.
  ++state_version_;
}

void Job::RecordWorldChangeLocked(int from, const std::string& why) {
  coordinator::WorldChange* c = history_.add_changes();
  c->set_generation(m_.generation);
  c->set_step(start_step_);
  c->set_from_size(from);
  c->set_to_size(m_.world_size);
  c->set_reason(why);
  c->set_unix_seconds(absl::ToDoubleSeconds(WallNow() - absl::UnixEpoch()));
  if (history_.changes_size() > kMaxWorldChanges) history_.mutable_changes()->DeleteSubrange(0, 1);
  history_dirty_ = true;
  if (from > 0) {
    SLOG(WARNING) << "the world changed size: " << from << " -> " << m_.world_size << " workers at step "
                  << start_step_ << " (generation " << m_.generation << "): " << why;
  }
  if (from > 0 && metrics_ != nullptr && start_step_ <= INT32_MAX) {
    metrics::MetricRecord record;
    record.set_split(metrics::MetricRecord::world);
    record.set_step(static_cast<int32_t>(start_step_));
    record.set_world_size(m_.world_size);
    record.set_previous_world_size(from);
    record.set_generation(static_cast<int32_t>(std::min<uint64_t>(m_.generation, INT32_MAX)));
    pending_records_.push_back(std::move(record));  // written by the caller's PersistState
  }
}

int64_t Job::PlanMemoryRestore() {
  RestorePlanInput in;
  in.memory_snapshots = config_.checkpoint().memory_every_steps() > 0;
  in.world_size = m_.world_size;
  for (const auto& [rank, m] : m_.members) in.held[rank] = m.held;
  in.disk_step = catalog_.Restore().step;
  in.limit = FailedSaveLimit(save_failures_, catalog_.latest_good());
  in.bad_steps = bad_memory_steps_;
  MemoryRestorePlan plan = shardline::PlanMemoryRestore(in);
  memory_sources_ = std::move(plan.sources);
  memory_world_ = plan.world;
  return plan.step;
}

absl::StatusOr<coordinator::RegisterResponse> Job::Register(const coordinator::RegisterRequest& req,
                                                           const std::function<bool()>& cancelled) {
  Notification answered;
  absl::StatusOr<coordinator::RegisterResponse> result;
  const uint64_t id = StartRegister(req, [&](absl::StatusOr<coordinator::RegisterResponse> r) {
    result = std::move(r);
    answered.Notify();
  });
  while (!answered.WaitForNotificationWithTimeout(absl::Milliseconds(100))) {
    CompleteRegistrations();  // no service may be driving them
    if (cancelled()) CancelRegistration(id);
  }
  return result;
}

uint64_t Job::StartRegister(const coordinator::RegisterRequest& req, RegisterDone done) {
  // Bounded before anything in it is logged or kept.
  if (absl::Status bad = CheckRegisterRequest(req, ReportLimits{}); !bad.ok()) {
    done(bad);
    return 0;
  }
  Parked p;
  p.req = req;
  p.done = std::move(done);
  // Made before taking the lock: reading /dev/urandom is I/O.
  absl::StatusOr<std::string> secret = NewToken();
  if (!secret.ok()) {
    p.done(secret.status());
    return 0;
  }
  p.secret = std::move(*secret);
  // A finished report sent along is taken, and the checkpoint it may
  // complete committed, before the registration can form a world: that
  // world then starts from it.
  Deferred later;
  {
    MutexLock lock(&mu_);
    TakeFinishedReportLocked(p.req, &later);
  }
  // The rare registration that carries a finished report waits for its
  // commit (on the disk thread, after whatever was queued before).
  RunDeferred(std::move(later), /*wait=*/true);
  std::optional<absl::StatusOr<coordinator::RegisterResponse>> answer;
  uint64_t id = 0;
  {
    MutexLock lock(&mu_);
    answer = AdmitLocked(p);
    if (!answer.has_value()) {
      id = next_registration_++;
      parked_.emplace(id, std::move(p));
    }
  }
  // A new or broken generation is made durable before any member of the
  // next one hears of it, without holding the lock over the disk write.
  PersistState();
  if (answer.has_value()) p.done(std::move(*answer));
  CompleteRegistrations();
  return id;
}

void Job::CancelRegistration(uint64_t id) {
  RegisterDone done;
  {
    MutexLock lock(&mu_);
    auto it = parked_.find(id);
    if (it == parked_.end()) return;
    const Parked& p = it->second;
    if (!p.waits_for_end) StepLocked(membership_event::Cancel{p.slot, p.req.incarnation()});
    done = std::move(it->second.done);
    parked_.erase(it);
  }
  done(absl::CancelledError("registration cancelled"));
}

void Job::CompleteRegistrations() {
  struct Answer {
    RegisterDone done;
    absl::StatusOr<coordinator::RegisterResponse> response;
    std::shared_ptr<const MemberBook> book;  // its peers still to fill in
  };
  std::vector<Answer> answers;
  for (;;) {
    {
      MutexLock lock(&mu_);
      if (!recheck_ && checked_durable_ == durable_generation_ && checked_generation_ == m_.generation &&
          checked_state_ == m_.state) {
        break;
      }
      recheck_ = false;
      checked_durable_ = durable_generation_;
      checked_generation_ = m_.generation;
      checked_state_ = m_.state;
      for (auto it = parked_.begin(); it != parked_.end();) {
        Parked& p = it->second;
        std::optional<absl::StatusOr<coordinator::RegisterResponse>> answer;
        std::shared_ptr<const MemberBook> book;
        if (p.waits_for_end) {
          if (m_.generation != p.finished_in || m_.state == JobState::kForming || m_.state == JobState::kDone ||
              m_.state == JobState::kFailed) {
            p.waits_for_end = false;
            answer = AdmitLocked(p);
            recheck_ = true;  // it may have formed a world, or wait for one now
          }
        } else if (durable_generation_ >= p.target || m_.state == JobState::kDone || m_.state == JobState::kFailed) {
          answer = FinishRegistrationLocked(p, &book);
        }
        if (answer.has_value()) {
          answers.push_back({std::move(p.done), std::move(*answer), std::move(book)});
          it = parked_.erase(it);
        } else {
          ++it;
        }
      }
    }
    PersistState();
  }
  for (Answer& a : answers) {
    if (a.book != nullptr && a.response.ok()) {
      FillPeers(*a.book, options_.token, &*a.response);
      // Its heartbeat deadline runs from its answer: it cannot report
      // before, and in a large world answering everyone takes a while.
      MutexLock lock(&mu_);
      StepLocked(membership_event::Answered{a.response->rank(), a.response->generation()});
    }
    a.done(std::move(a.response));
  }
}

void Job::TakeFinishedReportLocked(const coordinator::RegisterRequest& req, Deferred* later) {
  if (m_.state == JobState::kDone || m_.state == JobState::kFailed || !req.has_finished_report() ||
      !req.finished_report().finished() || req.finished_report().generation() != m_.generation) {
    return;
  }
  // Taken as if it came on the stream (ReportLocked checks the member's
  // secret and the report's bounds); shards already committed are left be.
  // Also when the world broke meanwhile (its stream's end was seen first):
  // shards every rank of that generation saved are a whole checkpoint, and
  // the next world starts from it instead of redoing the steps.
  const absl::Status taken = ReportLocked(req.finished_report(), later);
  if (!taken.ok()) SLOG(WARNING) << "resent finished report not taken: " << taken;
}

std::optional<absl::StatusOr<coordinator::RegisterResponse>> Job::AdmitLocked(Parked& p) {
  const coordinator::RegisterRequest& req = p.req;
  if (m_.state == JobState::kDone && !finished_durable_) {
    return absl::UnavailableError("the job is finishing; register again in a moment");
  }
  if (m_.Over()) return JobOver(final_);
  membership_event::Claim claim;
  claim.requested_slot = req.requested_rank();
  claim.incarnation = req.incarnation();
  claim.previous_generation = req.previous_generation();
  claim.reason = req.reason();
  claim.address = req.transport_address();
  claim.secret = p.secret;
  claim.held.assign(req.held_snapshots().begin(), req.held_snapshots().end());
  const MembershipEffects out = StepLocked(claim);
  if (out.claim_waits_for_end) {
    p.waits_for_end = true;
    p.finished_in = m_.generation;
    return std::nullopt;
  }
  if (out.claim_refused.has_value()) {
    // The refusal names no member's address: the caller may be anyone with
    // the token. The log has it.
    SLOG(WARNING) << "refused " << req.transport_address() << " rank " << req.requested_rank() << ": "
                  << out.claim_refused->message();
    return *out.claim_refused;
  }
  const MembershipEffects::ClaimTaken& taken = *out.claim_taken;
  const int n = options_.world_size;
  if (taken.joining) {
    SLOG(INFO) << "worker " << req.transport_address() << " registered as rank " << taken.slot
               << "; it joins the world of " << m_.world_size << " at the next committed checkpoint";
  } else if (n <= kLoggedRegistrations || taken.claimed == 1 || taken.claimed == n) {
    SLOG(INFO) << "worker " << req.transport_address() << " registered as rank " << taken.slot << " for generation "
               << taken.target << " (" << taken.claimed << "/" << n << ")";
  }
  // Answered once generation `target` is durable (CompleteRegistrations,
  // which notices: it is not yet).
  p.slot = taken.slot;
  p.target = taken.target;
  return std::nullopt;
}

void Job::FillPeers(const MemberBook& book, const std::string& token, coordinator::RegisterResponse* resp) {
  RestoreMoves restore;
  if (resp->memory_step() > 0) {
    restore.from_world = resp->memory_world_size() > 0 ? resp->memory_world_size() : resp->world_size();
    restore.sources.assign(resp->memory_sources().begin(), resp->memory_sources().end());
  }
  // The rank itself is listed too, so a world of one still lists a rank.
  std::vector<int> listed = DataPlanePeers(resp->rank(), static_cast<int>(book.addresses.size()), restore);
  listed.insert(std::lower_bound(listed.begin(), listed.end(), resp->rank()), resp->rank());
  for (int s : listed) {
    resp->add_peer_ranks(s);
    resp->add_peers(book.addresses[static_cast<size_t>(s)]);
    resp->add_peer_tags(MemberTag(book.secrets[static_cast<size_t>(s)], book.generation, resp->rank()));
    resp->add_park_tags(token.empty() ? std::string()
                                 : ParkTag(KeyFor(token, s), book.generation, resp->rank()));
  }
}

absl::StatusOr<coordinator::RegisterResponse> Job::FinishRegistrationLocked(const Parked& p,
                                                                           std::shared_ptr<const MemberBook>* book) {
  int rank = -1;
  for (const auto& [r, member] : m_.members) {
    if (member.slot == p.slot && member.incarnation == p.req.incarnation()) rank = r;
  }
  if (m_.generation != p.target || rank < 0) {
    if (m_.state == JobState::kDone || m_.state == JobState::kFailed) return JobOver(final_);
    return absl::AbortedError("the generation this worker registered for was superseded; register again");
  }
  coordinator::RegisterResponse resp;
  resp.set_rank(rank);
  resp.set_slot(p.slot);
  resp.set_world_size(m_.world_size);
  resp.set_generation(m_.generation);
  if (book_ == nullptr || book_->generation != m_.generation) {
    auto made = std::make_shared<MemberBook>();
    made->generation = m_.generation;
    for (const auto& [r, member] : m_.members) {
      made->addresses.push_back(member.address);
      made->secrets.push_back(member.secret);
    }
    book_ = std::move(made);
  }
  *book = book_;
  resp.set_member_secret(m_.members[rank].secret);
  resp.set_config_text(config_text_);
  resp.set_checkpoint_root(options_.checkpoint_root);
  resp.set_trace_dir(options_.trace_dir);
  if (memory_step_ > 0) {
    resp.set_start_step(memory_step_);
    resp.set_memory_step(memory_step_);
    for (int source : memory_sources_) resp.add_memory_sources(source);
    if (memory_world_ != m_.world_size) resp.set_memory_world_size(memory_world_);
  } else {
    const RestorePoint from = catalog_.Restore();
    resp.set_start_step(from.step);
    resp.set_restore_dir(from.dir);
  }
  resp.set_job_id(job_id_);
  resp.set_stop_at(stop_at_);
  return resp;
}

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

absl::Status Job::ReportLocked(const coordinator::WorkerReport& r, Deferred* later) {
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
  RETURN_IF_ERROR(CheckReport(r, limits));
  if (r.bad_checkpoint_step() > 0 && !catalog_.IsRestorePoint(r.bad_checkpoint_step())) {
    return absl::InvalidArgumentError(absl::StrCat("report from rank ", r.rank(), " refused: bad_checkpoint_step ",
                                                   r.bad_checkpoint_step(), " is not a checkpoint handed out"));
  }
  StepLocked(membership_event::Heard{r.rank(), r.steps_done()});
  WorldMember& m = m_.members[r.rank()];  // a report changes no membership but this member's
  furthest_step_ = std::max(furthest_step_, m.steps_done);
  if (r.has_time()) m.time = r.time();
  if (r.busy_seconds_per_step() > 0) m.busy_seconds_per_step = r.busy_seconds_per_step();
  if (r.sent_unix_micros() > 0) {
    const int64_t offset = r.sent_unix_micros() - absl::ToUnixMicros(WallNow());
    // sent - received = offset - latency: the largest is the closest.
    if (!m.clock_offset_micros.has_value() || offset > *m.clock_offset_micros) m.clock_offset_micros = offset;
  }
  if (r.total_steps() > 0) total_steps_ = r.total_steps();
  if (r.rank() == 0) {
    const absl::Time now = Now();
    if (now - rate_time_ >= absl::Seconds(1)) {
      steps_per_second_ = static_cast<double>(m.steps_done - rate_steps_) / absl::ToDoubleSeconds(now - rate_time_);
      rate_steps_ = m.steps_done;
      rate_time_ = now;
    }
  }
  for (const coordinator::SavedShard& saved : r.saved()) ShardSaved(r.rank(), saved, later);
  // Memory first, so the next world is handed the fallback; the mark is made
  // durable after the lock is released. Only the first report of a step acts.
  if (r.bad_checkpoint_step() > 0 && catalog_.NoteBad(r.bad_checkpoint_step())) {
    const int64_t bad_step = r.bad_checkpoint_step();
    const RestorePoint fallback = catalog_.Restore();
    later->bad_step = bad_step;
    later->bad_reason = r.bad_checkpoint_reason();
    if (fallback.dir.empty()) {
      // Checkpoints existed and none is usable: starting from scratch would
      // silently throw the run away (and overwrite them in time).
      Fail(absl::FailedPreconditionError(absl::StrCat(
          "no checkpoint of this job can be restored: the last one tried, step ", bad_step, ", failed verification on rank ",
          r.rank(), " (", r.bad_checkpoint_reason(), "), and every newer one was marked bad before it; not training "
          "from scratch over them. Move ", catalog_.root(), " aside to start anew, or set checkpoint.init_from")));
    } else {
      SLOG(ERROR) << "checkpoint at step " << bad_step << " failed verification on rank " << r.rank() << ": "
                  << r.bad_checkpoint_reason() << "; marked bad, falling back to step " << fallback.step;
      StepLocked(membership_event::Break{absl::StrCat("its checkpoint at step ", bad_step, " is bad")});
    }
  }
  for (const metrics::MetricRecord& record : r.metrics()) {
    if (metrics_ != nullptr) pending_records_.push_back(record);  // written after mu_, in order
    if (record.split() == metrics::MetricRecord::train) last_train_ = record;
    if (record.split() == metrics::MetricRecord::eval) {
      last_eval_ = record;
      if (IsBetterEval(record, best_eval_, config_.checkpoint())) best_eval_ = record;
    }
  }
  if (r.save_failed_step() > 0) SaveFailed(r);
  if (r.bad_memory_step() > 0 && r.bad_memory_step() == memory_step_ && bad_memory_steps_.insert(memory_step_).second) {
    SLOG(ERROR) << "the in-memory snapshot of step " << memory_step_ << " could not be restored on rank " << r.rank()
                << "; the next world restores from another snapshot or from disk";
    StepLocked(membership_event::Break{
        absl::StrCat("its in-memory snapshot of step ", memory_step_, " failed on rank ", r.rank())});
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
  return StepAhead(m_.FurthestStep(), steps_per_second_, total_steps_);
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
  const bool forming = m_.state == JobState::kForming;
  s.set_workers_registered(static_cast<int>(forming ? m_.pending.size() : m_.members.size()));
  int alive = 0;
  for (const auto& [rank, m] : m_.members) alive += (!forming && m.attached) ? 1 : 0;
  s.set_workers_alive(alive);
  s.set_worker_losses(losses_);
  s.set_last_checkpoint_step(catalog_.latest_good());
  s.set_bad_checkpoints(catalog_.bad_count());
  s.set_checkpoint_failures(checkpoint_failures_);
  s.set_start_step(start_step_);
  s.set_restored_from(memory_step_ > 0 ? "memory" : start_step_ > 0 ? "disk" : "");
  s.set_memory_recoveries(memory_recoveries_);
  s.set_disk_recoveries(disk_recoveries_);
  s.set_steps_redone(steps_redone_);
  s.set_nonfinite_losses(nonfinite_losses_);
  s.set_last_checkpoint_unix_seconds(absl::ToDoubleSeconds(last_commit_time_ - absl::UnixEpoch()));
  s.set_steps_per_second(steps_per_second_);
  if (last_train_.has_step()) *s.mutable_last_train() = last_train_;
  if (last_eval_.has_step()) *s.mutable_last_eval() = last_eval_;
  if (best_eval_.has_step()) *s.mutable_best_eval() = best_eval_;
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
  s.set_eta_seconds(steps_per_second_ > 0 && total_steps_ > 0 ? static_cast<double>(left) / steps_per_second_ : -1);
  return s;
}

}  // namespace shardline
