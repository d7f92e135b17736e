// The coordinator's catalog of checkpoints: commit records in the job store
// (RocksDB) and COMMITTED manifests on disk, checkpoints marked bad, the
// restore point handed to each new world, and retention. Knows nothing of
// membership or generations (coordinator/job.h owns those).
//
// Thread-safe. Its lock guards memory only and is never held across disk
// I/O, so the memory-only calls (Restore, NoteBad, latest_good, bad_count)
// are safe from under a caller's lock; Init, Commit and PersistBad do I/O
// and must not be called under a lock that live workers need.
//
//   CheckpointCatalog catalog(store, {root, env, config.checkpoint(), ...});
//   RETURN_IF_ERROR(catalog.Init());
//   RestorePoint from = catalog.Restore();        // for a new world
//   RETURN_IF_ERROR(catalog.Commit(step, world, job_id, shards));  // I/O
#ifndef SHARDLINE_COORDINATOR_CHECKPOINT_CATALOG_H_
#define SHARDLINE_COORDINATOR_CHECKPOINT_CATALOG_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "common/platform/env.h"
#include "common/platform/mutex.h"
#include "coordinator/job_store.h"
#include "proto/config.pb.h"
#include "proto/coordinator.pb.h"

namespace shardline {

struct CatalogOptions {
  // <workdir>/checkpoints. Empty: checkpoints are off and every call is a
  // no-op (Restore() is always "from scratch").
  std::string root;
  Env* env = nullptr;  // required
  // Retention (keep_last, keep_every), best_metric, and resume_from /
  // resume_step for a workdir with no checkpoint of its own.
  config::CheckpointConfig policy;
};

// Where a new world starts: step 0 and no directory means from scratch.
struct RestorePoint {
  int64_t step = 0;
  std::string dir;
};

class CheckpointCatalog {
 public:
  // `store` must outlive the catalog.
  CheckpointCatalog(JobStore* store, CatalogOptions options);

  // Finishes any commit a crash interrupted (record written, COMMITTED not),
  // deletes uncommitted step directories, loads the bad marks and finds the
  // restore point (this workdir's latest good commit, else resume_from's).
  // kFailedPrecondition if a committed checkpoint in root belongs to a job
  // other than `job_id` (e.g. copied in from another workdir).
  absl::Status Init(const std::string& job_id);

  // Commits `step` from every rank's reported shard: each file must exist
  // with its reported size (kDataLoss naming it otherwise); then the record
  // (synced), the COMMITTED manifest, BEST if the shards say so, and the
  // retention policy. Commits are serialised with each other. A step
  // already committed and not marked bad is left as it is (OK).
  absl::Status Commit(int64_t step, int world_size, const std::string& job_id,
                      const std::map<int, coordinator::SavedShard>& shards);

  // Memory only: `step` is no longer a restore point (Restore() and
  // latest_good() move to an older one). Returns false if it was already
  // marked. Make it durable with PersistBad.
  bool NoteBad(int64_t step);
  // True if `step` is a checkpoint this catalog could hand out (committed,
  // marked bad, or the one found on disk to resume from).
  bool IsRestorePoint(int64_t step) const;
  // Records the mark (synced) and moves the checkpoint to
  // root/quarantine (common/checkpoint/checkpoint_dir.h).
  absl::Status PersistBad(int64_t step, const std::string& reason);
  // Retention keeps `step` (the checkpoint the running world restored
  // from) until another is pinned; 0: none.
  void Pin(int64_t step);

  RestorePoint Restore() const;
  // <workdir>/checkpoints (empty: checkpoints are off).
  const std::string& root() const { return options_.root; }
  // The newest committed checkpoint not marked bad, 0 if none.
  int64_t latest_good() const;
  int64_t bad_count() const;

 private:
  int64_t LatestGoodLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  JobStore* const store_;
  const CatalogOptions options_;
  Mutex io_mu_;  // one commit or bad mark on disk at a time
  mutable Mutex mu_;
  std::set<int64_t> committed_ ABSL_GUARDED_BY(mu_);
  std::set<int64_t> bad_ ABSL_GUARDED_BY(mu_);
  RestorePoint resume_from_ ABSL_GUARDED_BY(mu_);  // used while nothing here is good
  int64_t pinned_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace shardline

#endif  // SHARDLINE_COORDINATOR_CHECKPOINT_CATALOG_H_
