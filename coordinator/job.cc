#include "coordinator/job.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/checkpoint_dir.h"
#include "common/config.h"
#include "common/fault_injection.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace shardline {
namespace {

constexpr char kJobIdKey[] = "job_id";
constexpr char kGenerationKey[] = "generation";
constexpr char kGlobalStepKey[] = "global_step";
constexpr char kCheckpointPrefix[] = "ckpt/";
constexpr char kBadPrefix[] = "bad/";

// A metrics line passes through untouched; this only reads it for progress.
bool IsTrainLine(const std::string& line) { return line.find("\"split\":\"train\"") != std::string::npos; }

}  // namespace

const char* JobStateName(JobState state) {
  switch (state) {
    case JobState::kForming: return "forming";
    case JobState::kRunning: return "running";
    case JobState::kStopping: return "stopping";
    case JobState::kDone: return "done";
    case JobState::kFailed: return "failed";
  }
  return "unknown";
}

Job::Job(config::JobConfig config, JobStore* store, MetricsSink* metrics, CoordinatorOptions options)
    : config_(std::move(config)),
      config_text_(ConfigToText(config_)),
      store_(store),
      metrics_(metrics),
      options_(options) {}

absl::Status Job::Init() {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(std::optional<std::string> id, store_->Get(kJobIdKey));
  if (id.has_value()) {
    job_id_ = *id;
  } else {
    std::random_device rd;
    job_id_ = absl::StrFormat("%08x%08x", rd(), rd());
    RETURN_IF_ERROR(store_->Put(kJobIdKey, job_id_, /*sync=*/true));
  }
  ASSIGN_OR_RETURN(std::optional<std::string> gen, store_->Get(kGenerationKey));
  if (gen.has_value() && !absl::SimpleAtoi(*gen, &generation_)) {
    return absl::DataLossError(absl::StrCat("job store: generation '", *gen, "' is not a number"));
  }
  if (!options_.checkpoint_root.empty()) {
    Env* env = options_.env;
    RETURN_IF_ERROR(env->CreateDirs(options_.checkpoint_root));
    // The RocksDB record is written first: finish a commit whose COMMITTED
    // file a crash prevented.
    ASSIGN_OR_RETURN(auto records, store_->List(kCheckpointPrefix));
    for (const auto& [key, value] : records) {
      state::CheckpointManifest m;
      if (!m.ParseFromString(value)) return absl::DataLossError(absl::StrCat("job store: bad record ", key));
      const std::string dir = StepDir(options_.checkpoint_root, m.step());
      if (env->IsDirectory(dir) && !env->FileExists(dir + "/" + kCommittedFile)) {
        SLOG(INFO) << "finishing the interrupted commit of step " << m.step();
        RETURN_IF_ERROR(WriteCommitted(env, dir, m));
      }
    }
    RETURN_IF_ERROR(DeleteUncommitted(env, options_.checkpoint_root));
    ASSIGN_OR_RETURN(auto bad, store_->List(kBadPrefix));
    for (const auto& [key, why] : bad) {
      int64_t step;
      if (absl::SimpleAtoi(key.substr(strlen(kBadPrefix) + 5), &step)) bad_.push_back(step);
    }
    ASSIGN_OR_RETURN(std::vector<int64_t> steps, CommittedSteps(env, options_.checkpoint_root));
    ASSIGN_OR_RETURN(last_checkpoint_, LatestGood());
    // Resume order: this workdir's latest commit, then resume_from.
    if (steps.empty() && !config_.checkpoint().resume_from().empty()) {
      const std::string other = config_.checkpoint().resume_from() + "/checkpoints";
      ASSIGN_OR_RETURN(std::vector<int64_t> theirs, CommittedSteps(env, other));
      const int64_t want = config_.checkpoint().resume_step();
      if (theirs.empty() || (want >= 0 && std::find(theirs.begin(), theirs.end(), want) == theirs.end())) {
        return absl::NotFoundError(absl::StrCat("config field checkpoint.resume_from: no committed checkpoint",
                                                want >= 0 ? absl::StrCat(" at step ", want) : "", " in ", other));
      }
      resume_step_ = want >= 0 ? want : theirs.back();
      resume_dir_ = StepDir(other, resume_step_);
      SLOG(INFO) << "will resume from " << resume_dir_;
    }
  }
  SLOG(INFO) << "job " << job_id_ << ": world of " << options_.world_size << ", last generation "
             << generation_ << ", latest committed checkpoint at step " << last_checkpoint_;
  return absl::OkStatus();
}

absl::StatusOr<int64_t> Job::LatestGood() {
  ASSIGN_OR_RETURN(std::vector<int64_t> steps, CommittedSteps(options_.env, options_.checkpoint_root));
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    if (std::find(bad_.begin(), bad_.end(), *it) == bad_.end()) return *it;
  }
  return 0;
}

absl::Status Job::Commit(int64_t step) {
  Env* env = options_.env;
  state::CheckpointManifest m;
  m.set_step(step);
  m.set_world_size(options_.world_size);
  m.set_job_id(job_id_);
  for (const auto& [rank, saved] : saves_[step]) {
    state::ShardEntry* e = m.add_shards();
    e->set_rank(rank);
    e->set_file(saved.file());
    e->set_size(saved.size());
    e->set_crc32c(saved.crc32c());
  }
  const std::string dir = StepDir(options_.checkpoint_root, step);
  for (const state::ShardEntry& e : m.shards()) {
    absl::StatusOr<int64_t> size = env->GetFileSize(dir + "/" + e.file());
    if (!size.ok() || *size != e.size()) {
      return absl::DataLossError(absl::StrCat("shard ", dir, "/", e.file(), " reported by rank ", e.rank(),
                                              " is missing or has the wrong size"));
    }
  }
  // The commit record (synced) first, then the COMMITTED file.
  RETURN_IF_ERROR(store_->Put(absl::StrCat(kCheckpointPrefix, StepDirName(step)), m.SerializeAsString(), /*sync=*/true));
  CrashPoint("after_commit_record", step);
  RETURN_IF_ERROR(WriteCommitted(env, dir, m));
  // A fresh save of a step once marked bad replaces the bad one.
  auto was_bad = std::find(bad_.begin(), bad_.end(), step);
  if (was_bad != bad_.end()) {
    bad_.erase(was_bad);
    RETURN_IF_ERROR(store_->Delete(absl::StrCat(kBadPrefix, StepDirName(step)), /*sync=*/true));
  }
  last_checkpoint_ = std::max(last_checkpoint_, step);
  last_save_time_ = absl::Now();
  const coordinator::SavedShard& any = saves_[step].begin()->second;
  SLOG(INFO) << "committed checkpoint at step " << step << " (" << m.shards_size() << " shards)"
             << (any.best() ? absl::StrCat(", the new best: ", config_.checkpoint().best_metric(), " ", any.best_value()) : "");
  if (any.best()) RETURN_IF_ERROR(WriteBest(env, options_.checkpoint_root, step, any.best_value()));
  const int64_t best = ReadBestStep(env, options_.checkpoint_root);
  ASSIGN_OR_RETURN(std::vector<int64_t> deleted,
                   ApplyRetention(env, options_.checkpoint_root, config_.checkpoint(),
                                  best >= 0 ? std::vector<int64_t>{best} : std::vector<int64_t>{}));
  for (int64_t d : deleted) RETURN_IF_ERROR(store_->Delete(absl::StrCat(kCheckpointPrefix, StepDirName(d)), false));
  return DeleteUncommitted(env, options_.checkpoint_root, step);
}

void Job::ShardSaved(int rank, const coordinator::SavedShard& saved) {
  if (options_.checkpoint_root.empty() || saved.world_size() != options_.world_size) return;
  auto& shards = saves_[saved.step()];
  shards[rank] = saved;
  if (static_cast<int>(shards.size()) < options_.world_size) return;
  absl::Status committed = Commit(saved.step());
  saves_.erase(saved.step());
  if (!committed.ok()) SLOG(ERROR) << "checkpoint at step " << saved.step() << " not committed: " << committed;
}

absl::Status Job::Persist(bool sync) {
  RETURN_IF_ERROR(store_->Put(kGenerationKey, absl::StrCat(generation_), sync));
  return store_->Put(kGlobalStepKey, absl::StrCat(GlobalStepLocked()), sync);
}

int64_t Job::GlobalStepLocked() {
  if (members_.empty()) return 0;
  int64_t step = INT64_MAX;
  for (const auto& [rank, m] : members_) step = std::min(step, m.steps_done);
  return step;
}

void Job::Fail(absl::Status status) {
  if (state_ == JobState::kDone || state_ == JobState::kFailed) return;
  SLOG(ERROR) << "job failed: " << status;
  final_ = std::move(status);
  state_ = JobState::kFailed;
}

void Job::Form() {
  generation_ += 1;
  members_ = std::move(pending_);
  pending_.clear();
  const absl::Time now = absl::Now();
  for (auto& [rank, m] : members_) m.last_seen = now;
  state_ = stop_requested_ ? JobState::kStopping : JobState::kRunning;
  stop_at_ = 0;
  checkpoint_at_ = 0;
  eval_at_ = 0;
  last_save_time_ = now;
  rate_steps_ = 0;
  rate_time_ = now;
  absl::Status persisted = Persist(/*sync=*/true);
  if (!persisted.ok()) Fail(Annotate(persisted, "persisting the new generation"));
  SLOG(INFO) << "generation " << generation_ << " formed: " << members_.size() << " workers";
}

void Job::BreakWorld(const std::string& why) {
  if (state_ != JobState::kRunning && state_ != JobState::kStopping) return;
  SLOG(WARNING) << "generation " << generation_ << " broken: " << why
                << "; waiting for " << options_.world_size << " workers to register";
  ++losses_;
  state_ = JobState::kForming;
  saves_.clear();  // a partial save of the broken world is never committed
  // Members learn the new generation from NextCommand; their old streams
  // then end.
  absl::Status persisted = Persist(/*sync=*/true);
  if (!persisted.ok()) Fail(Annotate(persisted, "persisting the broken generation"));
}

absl::StatusOr<coordinator::RegisterResponse> Job::Register(const coordinator::RegisterRequest& req,
                                                           const std::function<bool()>& cancelled) {
  absl::MutexLock lock(&mu_);
  const int n = options_.world_size;
  if (state_ == JobState::kDone || state_ == JobState::kFailed) {
    return absl::FailedPreconditionError(absl::StrCat("job ", job_id_, " is over (", JobStateName(state_),
                                                      final_.ok() ? "" : ": ", final_.message(), ")"));
  }
  if (req.requested_rank() < -1 || req.requested_rank() >= n) {
    return absl::InvalidArgumentError(absl::StrCat("requested rank ", req.requested_rank(),
                                                   " is not in a world of ", n));
  }
  if (state_ == JobState::kRunning || state_ == JobState::kStopping) {
    // A running world takes no one, unless a member says the world broke.
    for (const auto& [rank, m] : members_) {
      if (m.incarnation == req.incarnation() && req.previous_generation() == generation_) {
        BreakWorld(absl::StrCat("worker rank ", rank, " left it: ",
                                req.reason().empty() ? "a collective failed" : req.reason()));
        break;
      }
    }
    if (state_ != JobState::kForming) {
      if (req.requested_rank() >= 0) {
        const Member& holder = members_[req.requested_rank()];
        return absl::AlreadyExistsError(absl::StrCat(
            "rank ", req.requested_rank(), " is held by the live worker at ", holder.address,
            " (generation ", generation_, "); a second worker may not claim it"));
      }
      return absl::ResourceExhaustedError(absl::StrCat("all ", n, " ranks are held by live workers"));
    }
  }

  int rank = req.requested_rank();
  if (rank >= 0) {
    auto it = pending_.find(rank);
    if (it != pending_.end() && it->second.incarnation != req.incarnation()) {
      return absl::AlreadyExistsError(absl::StrCat("rank ", rank, " was already claimed by the worker at ",
                                                   it->second.address, " for generation ", generation_ + 1));
    }
  } else {
    // Prefer the rank this worker held before, then the lowest free one.
    for (const auto& [r, m] : pending_) {
      if (m.incarnation == req.incarnation()) rank = r;
    }
    for (int r = 0; r < n && rank < 0; ++r) {
      if (pending_.count(r) == 0) rank = r;
    }
  }
  Member& m = pending_[rank];
  m.address = req.transport_address();
  m.incarnation = req.incarnation();
  const uint64_t target = generation_ + 1;
  SLOG(INFO) << "worker " << m.address << " registered as rank " << rank << " for generation " << target
             << " (" << pending_.size() << "/" << n << ")";
  if (static_cast<int>(pending_.size()) == n) Form();

  auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return generation_ >= target || state_ == JobState::kDone || state_ == JobState::kFailed;
  };
  while (!mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Milliseconds(100))) {
    if (cancelled()) {
      auto it = pending_.find(rank);
      if (it != pending_.end() && it->second.incarnation == req.incarnation()) pending_.erase(it);
      return absl::CancelledError("registration cancelled");
    }
  }
  if (generation_ != target || members_.count(rank) == 0 ||
      members_[rank].incarnation != req.incarnation()) {
    if (state_ == JobState::kDone || state_ == JobState::kFailed) {
      return absl::FailedPreconditionError(absl::StrCat("job ", job_id_, " is over"));
    }
    return absl::AbortedError("the generation this worker registered for was superseded; register again");
  }
  coordinator::RegisterResponse resp;
  resp.set_rank(rank);
  resp.set_world_size(n);
  resp.set_generation(generation_);
  for (const auto& [r, member] : members_) resp.add_peers(member.address);
  resp.set_config_text(config_text_);
  resp.set_checkpoint_root(options_.checkpoint_root);
  if (last_checkpoint_ > 0) {
    resp.set_start_step(last_checkpoint_);
    resp.set_restore_dir(StepDir(options_.checkpoint_root, last_checkpoint_));
  } else if (!resume_dir_.empty()) {
    resp.set_start_step(resume_step_);
    resp.set_restore_dir(resume_dir_);
  }
  resp.set_job_id(job_id_);
  resp.set_stop_at(stop_at_);
  return resp;
}

absl::Status Job::Report(const coordinator::WorkerReport& r) {
  absl::MutexLock lock(&mu_);
  if (r.generation() != generation_ || members_.count(r.rank()) == 0) {
    return absl::FailedPreconditionError(absl::StrCat("report from rank ", r.rank(), " of generation ",
                                                      r.generation(), "; the job is at generation ",
                                                      generation_));
  }
  Member& m = members_[r.rank()];
  m.attached = true;
  m.last_seen = absl::Now();
  m.steps_done = std::max(m.steps_done, r.steps_done());
  if (r.total_steps() > 0) total_steps_ = r.total_steps();
  if (r.rank() == 0) {
    const absl::Time now = absl::Now();
    if (now - rate_time_ >= absl::Seconds(1)) {
      steps_per_second_ = static_cast<double>(m.steps_done - rate_steps_) / absl::ToDoubleSeconds(now - rate_time_);
      rate_steps_ = m.steps_done;
      rate_time_ = now;
    }
  }
  for (const coordinator::SavedShard& saved : r.saved()) ShardSaved(r.rank(), saved);
  if (r.bad_checkpoint_step() > 0 && std::find(bad_.begin(), bad_.end(), r.bad_checkpoint_step()) == bad_.end()) {
    const int64_t bad_step = r.bad_checkpoint_step();
    bad_.push_back(bad_step);
    absl::Status marked = store_->Put(absl::StrCat(kBadPrefix, StepDirName(bad_step)), r.bad_checkpoint_reason(), true);
    if (!marked.ok()) Fail(Annotate(marked, "marking a checkpoint bad"));
    absl::StatusOr<int64_t> fallback = LatestGood();
    if (!fallback.ok()) {
      Fail(fallback.status());
    } else {
      last_checkpoint_ = *fallback;
      SLOG(ERROR) << "checkpoint at step " << bad_step << " failed verification on rank " << r.rank() << ": "
                  << r.bad_checkpoint_reason() << "; marked bad, falling back to step " << last_checkpoint_;
      BreakWorld(absl::StrCat("its checkpoint at step ", bad_step, " is bad"));
    }
  }
  for (const std::string& line : r.metric_lines()) {
    if (metrics_ != nullptr) {
      absl::Status written = metrics_->WriteLine(line);
      if (!written.ok()) Fail(Annotate(written, "writing metrics.jsonl"));
    }
    if (IsTrainLine(line)) last_train_line_ = line;
  }
  if (!r.fatal_error().empty()) {
    Fail(absl::FailedPreconditionError(absl::StrCat("worker rank ", r.rank(), ": ", r.fatal_error())));
  } else if (!r.watchdog().empty()) {
    m.evicted = true;
    BreakWorld(absl::StrCat("worker rank ", r.rank(), "'s watchdog fired: ", r.watchdog()));
  } else if (r.finished() && !m.finished) {
    m.finished = true;
    bool all = true;
    for (const auto& [rank, member] : members_) all = all && member.finished;
    if (all && (state_ == JobState::kRunning || state_ == JobState::kStopping)) {
      state_ = JobState::kDone;
      final_ = absl::OkStatus();
      absl::Status persisted = Persist(/*sync=*/true);
      if (!persisted.ok()) Fail(Annotate(persisted, "persisting the final step"));
      SLOG(INFO) << "every worker finished at step " << GlobalStepLocked();
    }
  }
  return absl::OkStatus();
}

bool Job::StreamOver(int rank, uint64_t generation) {
  if (state_ == JobState::kFailed || state_ == JobState::kForming || generation != generation_) return true;
  auto it = members_.find(rank);
  return it == members_.end() || it->second.evicted;
}

std::optional<coordinator::CoordinatorCommand> Job::NextCommand(int rank, uint64_t generation,
                                                                const coordinator::CoordinatorCommand& last,
                                                                absl::Duration wait, bool* end) {
  absl::MutexLock lock(&mu_);
  auto news = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return StreamOver(rank, generation) || stop_at_ != last.stop_at() || checkpoint_at_ != last.checkpoint_at() ||
           eval_at_ != last.eval_at();
  };
  mu_.AwaitWithTimeout(absl::Condition(&news), wait);
  *end = StreamOver(rank, generation);
  coordinator::CoordinatorCommand c;
  if (*end) {
    auto it = members_.find(rank);
    const bool evicted = it != members_.end() && it->second.evicted && generation == generation_;
    if (state_ == JobState::kFailed || evicted) return std::nullopt;
    // The world moved on: tell the worker which generation to join.
    c.set_new_generation(state_ == JobState::kForming ? generation_ + 1 : generation_);
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
  absl::MutexLock lock(&mu_);
  if (generation != generation_ || members_.count(rank) == 0) return;
  Member& m = members_[rank];
  m.attached = false;
  if (m.finished || state_ == JobState::kDone || state_ == JobState::kFailed) return;
  if (broken && state_ == JobState::kForming) {
    SLOG(WARNING) << "worker rank " << rank << " (" << m.address << ") of generation " << generation
                  << " was lost: its heartbeat stream broke";
  }
  BreakWorld(absl::StrCat("worker rank ", rank, " (", m.address, ") was lost: its heartbeat stream ",
                          broken ? "broke" : "ended"));
}

void Job::CheckHeartbeats() {
  absl::MutexLock lock(&mu_);
  if (state_ != JobState::kRunning && state_ != JobState::kStopping) return;
  const absl::Time now = absl::Now();
  for (auto& [rank, m] : members_) {
    if (!m.finished && now - m.last_seen > options_.heartbeat_timeout) {
      m.evicted = true;
      BreakWorld(absl::StrCat("worker rank ", rank, " (", m.address, ") was lost: no heartbeat for ",
                              absl::FormatDuration(now - m.last_seen)));
      return;
    }
  }
}

void Job::RequestStop(const std::string& why) {
  absl::MutexLock lock(&mu_);
  if (stop_requested_) return;
  stop_requested_ = true;
  if (state_ == JobState::kForming) {
    SLOG(INFO) << why << ": stopping; no world is running";
    state_ = JobState::kDone;
    final_ = absl::OkStatus();
    return;
  }
  if (state_ != JobState::kRunning) return;
  stop_at_ = StepAheadLocked();
  state_ = JobState::kStopping;
  SLOG(INFO) << why << ": every worker stops after step " << stop_at_;
}

int64_t Job::StepAheadLocked() {
  int64_t furthest = 0;
  for (const auto& [rank, m] : members_) furthest = std::max(furthest, m.steps_done);
  // Heartbeats lag by up to ~100 ms; half a second of steps ahead (at least
  // 2) is ahead of every worker. The workers' per-step agreement makes the
  // decision exact even if some worker were past it.
  const int64_t margin = std::max<int64_t>(2, static_cast<int64_t>(std::ceil(steps_per_second_ * 0.5)));
  return total_steps_ > 0 ? std::min(total_steps_, furthest + margin) : furthest + margin;
}

void Job::MaybeRequestCheckpoint() {
  absl::MutexLock lock(&mu_);
  const double period = config_.checkpoint().every_seconds();
  if (period <= 0 || options_.checkpoint_root.empty() || state_ != JobState::kRunning) return;
  if (absl::Now() - last_save_time_ < absl::Seconds(period)) return;
  checkpoint_at_ = StepAheadLocked();
  last_save_time_ = absl::Now();  // the commit moves it again
  SLOG(INFO) << "checkpoint.every_seconds: every worker saves after step " << checkpoint_at_;
}

void Job::RequestEval() {
  absl::MutexLock lock(&mu_);
  if (state_ != JobState::kRunning) return;
  eval_at_ = StepAheadLocked();
  SLOG(INFO) << "eval requested: every worker evaluates after step " << eval_at_;
}

bool Job::AwaitEnd(absl::Duration wait) {
  absl::MutexLock lock(&mu_);
  auto over = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return state_ == JobState::kDone || state_ == JobState::kFailed;
  };
  return mu_.AwaitWithTimeout(absl::Condition(&over), wait);
}

absl::Status Job::final_status() {
  absl::MutexLock lock(&mu_);
  return final_;
}

JobSnapshot Job::Snapshot() {
  absl::MutexLock lock(&mu_);
  JobSnapshot s;
  s.state = state_;
  s.generation = generation_;
  s.global_step = GlobalStepLocked();
  s.total_steps = total_steps_;
  const bool forming = state_ == JobState::kForming;
  s.workers_registered = static_cast<int>(forming ? pending_.size() : members_.size());
  for (const auto& [rank, m] : members_) s.workers_alive += (!forming && m.attached) ? 1 : 0;
  s.worker_losses = losses_;
  s.last_train_line = last_train_line_;
  s.steps_per_second = steps_per_second_;
  s.last_checkpoint = last_checkpoint_;
  s.bad_checkpoints = static_cast<int64_t>(bad_.size());
  return s;
}

}  // namespace shardline
