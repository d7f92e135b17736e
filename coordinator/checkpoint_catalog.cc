#include "coordinator/checkpoint_catalog.h"

#include <algorithm>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/checkpoint/checkpoint_dir.h"
#include "common/checkpoint/verify.h"
#include "common/faults/fault_injection.h"
#include "common/platform/logging.h"
#include "common/platform/status_macros.h"

namespace shardline {
namespace {

constexpr char kCheckpointPrefix[] = "ckpt/";
constexpr char kBadPrefix[] = "bad/";

}  // namespace

CheckpointCatalog::CheckpointCatalog(JobStore* store, CatalogOptions options)
    : store_(store), options_(std::move(options)) {
  SCHECK(options_.env != nullptr) << "CatalogOptions.env is required";
}

absl::Status CheckpointCatalog::Init(const std::string& job_id) {
  if (options_.root.empty()) return absl::OkStatus();
  MutexLock io(&io_mu_);
  Env* env = options_.env;
  RETURN_IF_ERROR(env->CreateDirs(options_.root));
  // The RocksDB record is written first: finish a commit whose COMMITTED
  // file a crash prevented. A record is dropped last, though, when
  // retention removes a step (COMMITTED, then the files, then the record):
  // a step whose shards are no longer all there was being removed, not
  // committed, and DeleteUncommitted below finishes removing it.
  ASSIGN_OR_RETURN(auto records, store_->List(kCheckpointPrefix));
  for (const auto& [key, value] : records) {
    state::CheckpointManifest m;
    if (!m.ParseFromString(value)) return absl::DataLossError(absl::StrCat("job store: bad record ", key));
    const std::string dir = StepDir(options_.root, m.step());
    if (!env->IsDirectory(dir) || IsCommitted(env, dir)) continue;
    if (const absl::Status whole = CheckShardFiles(env, dir, m); !whole.ok()) {
      SLOG(INFO) << "step " << m.step() << " was being removed when the last coordinator stopped (" << whole.message()
                 << "); finishing its removal";
      RETURN_IF_ERROR(store_->Delete(key, /*sync=*/true));
      continue;
    }
    SLOG(INFO) << "finishing the interrupted commit of step " << m.step();
    RETURN_IF_ERROR(WriteCommitted(env, dir, m));
  }
  ASSIGN_OR_RETURN(const std::vector<int64_t> removed, DeleteUncommitted(env, options_.root));
  if (!removed.empty()) SLOG(INFO) << DescribeUncommittedRemoved(options_.root, removed);
  std::set<int64_t> bad;
  ASSIGN_OR_RETURN(auto bad_records, store_->List(kBadPrefix));
  for (const auto& [key, why] : bad_records) {
    int64_t step;
    if (absl::SimpleAtoi(key.substr(sizeof(kBadPrefix) - 1 + 5), &step)) bad.insert(step);
  }
  ASSIGN_OR_RETURN(std::vector<int64_t> steps, CommittedSteps(env, options_.root));
  RETURN_IF_ERROR(CheckCheckpointsBelongTo(env, options_.root, steps, job_id));
  RestorePoint resume;
  // Resume order: this workdir's latest commit, then resume_from.
  if (steps.empty() && !options_.policy.resume_from().empty()) {
    const std::string other = CheckpointRoot(options_.policy.resume_from());
    ASSIGN_OR_RETURN(std::vector<int64_t> theirs, CommittedSteps(env, other));
    const int64_t want = options_.policy.resume_step();
    if (theirs.empty() || (want >= 0 && std::find(theirs.begin(), theirs.end(), want) == theirs.end())) {
      return absl::NotFoundError(absl::StrCat("config field checkpoint.resume_from: no committed checkpoint",
                                              want >= 0 ? absl::StrCat(" at step ", want) : "", " in ", other));
    }
    resume.step = want >= 0 ? want : theirs.back();
    resume.dir = StepDir(other, resume.step);
    SLOG(INFO) << "will resume from " << resume.dir;
  }
  MutexLock lock(&mu_);
  committed_.insert(steps.begin(), steps.end());
  bad_ = std::move(bad);
  resume_from_ = resume;
  return absl::OkStatus();
}

absl::Status CheckpointCatalog::Commit(int64_t step, int world_size, const std::string& job_id,
                                       const std::map<int, coordinator::SavedShard>& shards) {
  if (options_.root.empty()) return absl::OkStatus();
  MutexLock io(&io_mu_);
  Env* env = options_.env;
  const bool gone = !env->IsDirectory(StepDir(options_.root, step));
  {
    MutexLock lock(&mu_);
    // Reported again (a resent finished report): already done. A step marked
    // bad and saved anew is committed again.
    if (committed_.count(step) > 0 && bad_.count(step) == 0) return absl::OkStatus();
    // Resent after a newer commit whose retention deleted it (a worker
    // resends its last saves after a coordinator pause): nothing to commit,
    // and nothing failed.
    if (gone && !committed_.empty() && step < *committed_.rbegin()) {
      SLOG(INFO) << "shards of step " << step << " reported again after step " << *committed_.rbegin()
                 << " was committed and retention removed it; nothing to do";
      return absl::OkStatus();
    }
  }
  state::CheckpointManifest m;
  m.set_step(step);
  m.set_world_size(world_size);
  m.set_job_id(job_id);
  bool best = false;
  double best_value = 0;
  for (const auto& [rank, saved] : shards) {
    state::ShardEntry* e = m.add_shards();
    e->set_rank(rank);
    e->set_file(saved.file());
    e->set_size(saved.size());
    e->set_crc32c(saved.crc32c());
    if (saved.numerics() != 0) e->set_numerics(saved.numerics());
    best = saved.best();
    best_value = saved.best_value();
  }
  const std::string dir = StepDir(options_.root, step);
  // What the workers reported becomes the manifest only if it is one: a
  // shard per rank, named as the format names it, there with its size.
  RETURN_IF_ERROR(CheckManifest(m, dir));
  RETURN_IF_ERROR(CheckShardFiles(env, dir, m));
  // The commit record (synced) first, then the COMMITTED file.
  RETURN_IF_ERROR(store_->Put(absl::StrCat(kCheckpointPrefix, StepDirName(step)), m.SerializeAsString(), /*sync=*/true));
  CrashPoint("after_commit_record", step);
  RETURN_IF_ERROR(WriteCommitted(env, dir, m));
  CrashPoint("after_committed_file", step);
  bool was_bad;
  {
    MutexLock lock(&mu_);
    committed_.insert(step);
    // A fresh save of a step once marked bad replaces the bad one.
    was_bad = bad_.erase(step) > 0;
  }
  if (was_bad) RETURN_IF_ERROR(store_->Delete(absl::StrCat(kBadPrefix, StepDirName(step)), /*sync=*/true));
  SLOG(INFO) << "committed checkpoint at step " << step << " (" << m.shards_size() << " shards)"
             << (best ? absl::StrCat(", the new best: ", options_.policy.best_metric(), " ", best_value) : "");
  std::vector<int64_t> pinned;
  {
    MutexLock lock(&mu_);
    if (pinned_ > 0) pinned.push_back(pinned_);
  }
  ASSIGN_OR_RETURN(std::vector<int64_t> deleted,
                   FinishCommit(env, options_.root, options_.policy, step,
                                                  best ? std::optional<double>(best_value) : std::nullopt, pinned));
  {
    MutexLock lock(&mu_);
    for (int64_t d : deleted) committed_.erase(d);
  }
  for (int64_t d : deleted) RETURN_IF_ERROR(store_->Delete(absl::StrCat(kCheckpointPrefix, StepDirName(d)), false));
  return absl::OkStatus();
}

bool CheckpointCatalog::NoteBad(int64_t step) {
  MutexLock lock(&mu_);
  return bad_.insert(step).second;
}

bool CheckpointCatalog::IsRestorePoint(int64_t step) const {
  MutexLock lock(&mu_);
  // A bad one was handed out too (its quarantine may come before a second
  // rank's report of it).
  return committed_.count(step) > 0 || bad_.count(step) > 0 || (resume_from_.step > 0 && resume_from_.step == step);
}

absl::Status CheckpointCatalog::PersistBad(int64_t step, const std::string& reason) {
  MutexLock io(&io_mu_);
  RETURN_IF_ERROR(store_->Put(absl::StrCat(kBadPrefix, StepDirName(step)), reason, /*sync=*/true));
  if (options_.root.empty()) return absl::OkStatus();
  // Set aside, not deleted: never restored, listed or counted by retention
  // again, and there for a person to look at.
  RETURN_IF_ERROR(QuarantineCheckpoint(options_.env, options_.root, step, reason));
  RETURN_IF_ERROR(store_->Delete(absl::StrCat(kCheckpointPrefix, StepDirName(step)), /*sync=*/true));
  SLOG(WARNING) << "checkpoint at step " << step << " moved to " << options_.root << "/" << kQuarantineDir << "/"
                << StepDirName(step) << " (" << reason << ")";
  MutexLock lock(&mu_);
  committed_.erase(step);
  return absl::OkStatus();
}

void CheckpointCatalog::Pin(int64_t step) {
  MutexLock lock(&mu_);
  pinned_ = step;
}

int64_t CheckpointCatalog::LatestGoodLocked() const {
  for (auto it = committed_.rbegin(); it != committed_.rend(); ++it) {
    if (bad_.count(*it) == 0) return *it;
  }
  return 0;
}

RestorePoint CheckpointCatalog::Restore() const {
  MutexLock lock(&mu_);
  const int64_t good = LatestGoodLocked();
  if (good > 0) return RestorePoint{good, StepDir(options_.root, good)};
  return resume_from_;
}

int64_t CheckpointCatalog::latest_good() const {
  MutexLock lock(&mu_);
  return LatestGoodLocked();
}

int64_t CheckpointCatalog::bad_count() const {
  MutexLock lock(&mu_);
  return static_cast<int64_t>(bad_.size());
}

}  // namespace shardline
