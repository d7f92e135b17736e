#include "coordinator/job.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/checkpoint/checkpoint_dir.h"
#include "common/job/config.h"
#include "common/job/islands.h"
#include "common/faults/fault_injection.h"
#include "common/platform/logging.h"
#include "common/net/rpc_auth.h"
#include "common/platform/status_macros.h"
#include "coordinator/decide/restore_plan.h"
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

MembershipConfig MembershipConfigFor(const config::JobConfig& config, const CoordinatorOptions& options) {
  MembershipConfig c;
  c.slots = options.world_size;
  c.min_workers = config.runtime().min_workers();
  c.islands = std::max(config.collective().islands(), 1);
  c.min_islands = config.runtime().min_islands();
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
      writer_(options.disk_thread ? std::make_unique<DiskWriter>(DiskWriterOptions{}) : nullptr) {
  SCHECK(options_.env != nullptr) << "CoordinatorOptions.env is required";
}

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
    last_commit_time_ = WallNow(options_.env);
    m_.forming_since = Now();
    if (finished_step.has_value()) {
      m_.state = JobState::kDone;  // set before any event: the store says so
      final_ = absl::OkStatus();
      finished_durable_ = true;
      finished_at_start_ = true;
      finished_step_ = *finished_step;
    }
    SLOG(INFO) << "job " << job_id_ << ": world of " << options_.world_size
               << (elastic() ? absl::StrCat(" (elastic: at least ", ElasticFloor(), ")") : "")
               << ", last generation " << m_.generation << ", latest committed checkpoint at step "
               << catalog_.latest_good();
  }
  return absl::OkStatus();
}

void Job::BookStepLocked(const BookEvent& event, Deferred* later) {
  const BookEffects out = Step(checkpoints_, event);
  if (out.error && !out.fail.has_value()) SLOG(ERROR) << out.reason;
  if (out.commit.has_value() && later != nullptr) {
    later->commits.push_back(*out.commit);
    ++commits_pending_;  // until RunDeferredNow has tried it
  }
  if (out.mark_bad.has_value() && later != nullptr) {
    later->bad_step = out.mark_bad->step;
    later->bad_reason = out.mark_bad->why;
  }
  if (out.break_world.has_value()) StepLocked(membership_event::Break{*out.break_world});
  if (out.fail.has_value()) Fail(*out.fail);
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
  for (const BookCommit& c : later.commits) {
    absl::Status committed = catalog_.Commit(c.step, c.world, job_id_, c.shards);
    // Out of descriptors (a flood of connections, issue 62): a commit is
    // idempotent, so it is tried again a few times, 0.1 s, 0.2 s, ... 1.6 s
    // apart, before it counts as failed.
    for (int64_t wait_ms = 100; IsOutOfDescriptors(committed) && wait_ms <= 1600; wait_ms *= 2) {
      SLOG(WARNING) << "committing step " << c.step << " ran out of file descriptors; trying again in " << wait_ms
                    << " ms: " << committed;
      options_.env->SleepForMicros(wait_ms * 1000);
      committed = catalog_.Commit(c.step, c.world, job_id_, c.shards);
    }
    MutexLock lock(&mu_);
    --commits_pending_;
    if (!committed.ok()) {
      BookStepLocked(book_event::CommitFailed{c.step, committed.ToString()}, nullptr);
      continue;
    }
    last_save_time_ = Now();
    last_commit_time_ = WallNow(options_.env);
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
    const MembershipEffects::ShortOfWorkers& s = *out.short_of_workers;
    if (config_.runtime().min_islands() > 0) {
      SLOG(WARNING) << s.have << " of " << options_.world_size << " workers registered after "
                    << absl::FormatDuration(s.waited) << ", " << s.whole_islands
                    << " islands whole; runtime.min_islands is " << config_.runtime().min_islands()
                    << ": waiting for " << config_.runtime().min_islands() - s.whole_islands << " more";
    } else {
      SLOG(WARNING) << s.have << " of " << options_.world_size << " workers registered after "
                    << absl::FormatDuration(s.waited) << "; runtime.min_workers is "
                    << config_.runtime().min_workers() << ": waiting for "
                    << config_.runtime().min_workers() - s.have << " more";
    }
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
  if (out.stop_gave_up_forming) {
    SLOG(WARNING) << "a graceful stop was under way and no world formed again within "
                  << absl::FormatDuration(membership_config_.stop_forming_timeout) << " (the workers are gone): "
                  << "stopping; " << m_.pending.size() << " of " << options_.world_size
                  << " workers had registered. Every committed checkpoint is kept; run again to resume";
  }
  if (out.stopped_forming) final_ = absl::OkStatus();
  return out;
}

void Job::OnFormedLocked(const MembershipEffects::Formed& formed) {
  const absl::Time now = Now();
  stop_at_ = 0;  // set below once start_step_ is known, if stopping
  checkpoint_at_ = 0;
  eval_at_ = 0;
  outer_.reset();
  last_save_time_ = now;
  snapshot_step_ = PlanSnapshotRestore();
  const int64_t disk_step = catalog_.Restore().step;
  start_step_ = snapshot_step_ > 0 ? snapshot_step_ : disk_step;
  // Retention never deletes the checkpoint this world restored from.
  if (snapshot_step_ == 0) catalog_.Pin(disk_step);
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
  if (snapshot_step_ > 0) {
    ++memory_recoveries_;
    std::string moves;
    for (int r = 0; r < static_cast<int>(memory_sources_.size()); ++r) {
      if (memory_sources_[r] < 0) {
        absl::StrAppend(&moves, moves.empty() ? "" : ", ", "shard ", r, " unread");  // of an island not read
      } else if (memory_sources_[r] != r || memory_world_ != m_.world_size) {
        absl::StrAppend(&moves, moves.empty() ? "" : ", ", "shard ", r, " from rank ", memory_sources_[r]);
      }
    }
    SLOG(INFO) << "generation " << m_.generation << " restores step " << snapshot_step_ << " from the workers' memory ("
               << (memory_world_ != m_.world_size ? absl::StrCat("resharded from a world of ", memory_world_, ": ") : "")
               << (moves.empty() ? std::string("every rank holds its own shard") : moves)
               << "); no checkpoint is read" << (disk_step > 0 ? absl::StrCat("; disk has step ", disk_step) : "");
  } else if (disk_step > 0) {
    ++disk_recoveries_;
    SLOG(INFO) << "generation " << m_.generation << " restores step " << disk_step << " from disk";
  }
  rate_ = StartStepRate(0, now);
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
                  << (elastic() ? absl::StrCat(" (or ", ElasticFloor(), " after ",
                                               config_.runtime().replace_timeout_seconds(), " s)")
                                : "");
    ++losses_;
    last_disruption_ = broken.why;
  }
  BookStepLocked(book_event::WorldBroken{}, nullptr);  // a partial save of it is never committed
  // Members learn the new generation from NextCommand; their old streams
  // then end.
  ++state_version_;
}

std::string Job::ElasticFloor() const {
  if (config_.runtime().min_islands() > 0) {
    const int j = config_.runtime().min_islands();
    return absl::StrCat(j, j == 1 ? " whole island" : " whole islands");
  }
  return absl::StrCat(config_.runtime().min_workers());
}

void Job::RecordWorldChangeLocked(int from, const std::string& why) {
  coordinator::WorldChange* c = history_.add_changes();
  c->set_generation(m_.generation);
  c->set_step(start_step_);
  c->set_from_size(from);
  c->set_to_size(m_.world_size);
  c->set_reason(why);
  c->set_unix_seconds(absl::ToDoubleSeconds(WallNow(options_.env) - absl::UnixEpoch()));
  if (history_.changes_size() > kMaxWorldChanges) history_.mutable_changes()->DeleteSubrange(0, 1);
  history_dirty_ = true;
  // Whether the job takes outer steps is the config's: after.outer_steps
  // answers for both sizes.
  const IslandShape before = ShapeIslands(config_, from);
  const IslandShape after = ShapeIslands(config_, m_.world_size);
  if (from > 0) {
    SLOG(WARNING) << "the world changed size: " << from << " -> " << m_.world_size << " workers at step "
                  << start_step_ << " (generation " << m_.generation
                  << (after.outer_steps ? absl::StrCat("; islands ", before.islands, " -> ", after.islands)
                                         : std::string())
                  << "): " << why;
  }
  if (from > 0 && metrics_ != nullptr && start_step_ <= INT32_MAX) {
    metrics::MetricRecord record;
    record.set_split(metrics::MetricRecord::world);
    record.set_step(static_cast<int32_t>(start_step_));
    record.set_world_size(m_.world_size);
    record.set_previous_world_size(from);
    if (after.outer_steps) {
      record.set_islands(after.islands);
      record.set_previous_islands(before.islands);
    }
    record.set_generation(static_cast<int32_t>(std::min<uint64_t>(m_.generation, INT32_MAX)));
    pending_records_.push_back(std::move(record));  // written by the caller's PersistState
  }
}

int64_t Job::PlanSnapshotRestore() {
  RestorePlanInput in;
  in.memory_snapshots = config_.checkpoint().memory_every_steps() > 0;
  in.world_size = m_.world_size;
  for (const auto& [rank, m] : m_.members) in.held[rank] = m.held;
  in.disk_step = catalog_.Restore().step;
  in.limit = FailedSaveLimit(checkpoints_.save_failures, catalog_.latest_good());
  in.bad_steps = bad_memory_steps_;
  in.island_size = ShapeIslands(config_, m_.world_size).RegisteredIslandSize();
  SnapshotRestorePlan plan = shardline::PlanSnapshotRestore(in);
  memory_sources_ = std::move(plan.sources);
  memory_world_ = plan.world;
  return plan.step;
}

}  // namespace shardline
