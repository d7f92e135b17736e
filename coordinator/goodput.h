// Goodput: the job's productive training time against the time lost, by
// cause, over its whole life - every generation and every coordinator
// restart - in the vocabulary of Google's ml-goodput-measurement.
//
// The coordinator's loop calls Advance() every tick with the job's status;
// the time since the last tick goes to one bucket by what the job was doing:
//   forming a world           startup (before any world completed a step),
//                             recovery (after)
//   running, before its first step completes
//                             startup / recovery, as above
//   running                   the workers' reported time (the furthest rank's
//                             per kind, TimeAccount) goes to checkpoint_restore,
//                             data_loading, checkpoint_save and evaluation;
//                             the rest to wasted_progress while the world
//                             redoes steps some world already completed
//                             (after a restore from an older checkpoint),
//                             else to goodput - split by the share of the
//                             tick's steps that were redone.
//   the coordinator down      recovery (the gap found at Load), a disruption
// Persisted in the job store (key "goodput") every second, at every change
// of world and at the end, so a restarted coordinator continues the account.
//
//   ASSIGN_OR_RETURN(auto ledger, GoodputLedger::Load(store, WallNow()));
//   every tick:  ledger->Advance(job.Snapshot(), WallNow());
//                RETURN_IF_ERROR(ledger->MaybePersist(WallNow()));
#ifndef SHARDLINE_COORDINATOR_GOODPUT_H_
#define SHARDLINE_COORDINATOR_GOODPUT_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/platform/mutex.h"
#include "common/status/goodput_account.h"
#include "coordinator/job_store.h"
#include "proto/coordinator.pb.h"

namespace shardline {

class GoodputLedger {
 public:
  // Loads the account an earlier coordinator of this job persisted (or
  // starts one). If that coordinator had seen a step, the time since its
  // last write counts as recovery and as one disruption.
  static absl::StatusOr<std::unique_ptr<GoodputLedger>> Load(JobStore* store, absl::Time now);

  // Accounts the time since the last call (or Load) by `status`.
  void Advance(const coordinator::JobStatus& status, absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);

  // Writes the account (synced) if `every` has passed since the last write,
  // a world broke or formed since, or with force. A coordinator killed
  // loses at most `every` of accounting (the next one counts the gap from
  // the last write as recovery).
  absl::Status MaybePersist(absl::Time now, bool force = false,
                            absl::Duration every = absl::Seconds(1)) ABSL_LOCKS_EXCLUDED(mu_);

  coordinator::Goodput Snapshot() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  GoodputLedger(JobStore* store, coordinator::Goodput account, absl::Time now);
  void Add(const char* kind, double seconds) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  JobStore* const store_;
  mutable Mutex mu_;
  coordinator::Goodput account_ ABSL_GUARDED_BY(mu_);
  absl::Time last_tick_ ABSL_GUARDED_BY(mu_);
  absl::Time last_persist_ ABSL_GUARDED_BY(mu_);
  bool dirty_ ABSL_GUARDED_BY(mu_) = false;  // a disruption or new world not yet written
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t losses_seen_ ABSL_GUARDED_BY(mu_) = 0;
  // The furthest step any earlier world completed: this generation's steps
  // up to it are redone work.
  int64_t redo_until_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t last_step_ ABSL_GUARDED_BY(mu_) = 0;  // this generation's, at the last tick (0: none yet)
  // The furthest rank's TimeAccount of this generation, as last accounted.
  coordinator::TimeAccount accounted_ ABSL_GUARDED_BY(mu_);
  // Reported time not yet matched by wall time (reports run ahead of ticks):
  // taken from the next ticks' remainder.
  double ahead_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace shardline

#endif  // SHARDLINE_COORDINATOR_GOODPUT_H_
