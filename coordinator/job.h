// The coordinator's view of one job: membership and ranks (decided by the
// pure state machine of membership.h; Job applies what it decides), world
// generations, the global step, job-wide decisions (stop at step s), worker
// loss and the job's end. Thread-safe; knows nothing of gRPC (service.h
// translates RPCs into these calls).
//
// Life of a generation:
//   forming  -- workers Register (blocking) until all N ranks are claimed;
//               then the generation number is bumped, persisted (synced) and
//               every waiting Register returns the world.
//   running  -- each worker keeps a Heartbeat stream: Report() in,
//               NextCommand() out. The global step is the minimum of the
//               workers' reported steps.
//   broken   -- a worker's stream breaks, it misses its heartbeat deadline,
//               its watchdog fires, or a survivor re-registers saying the
//               world broke: every member is told the new generation and
//               the job is forming again (the lost rank is free).
// Slots and ranks: a worker claims one of the job's N slots (its `--rank`,
// kept across generations); its rank is its place among the slots present
// when the generation forms. With every slot there, rank == slot.
// Elastic worlds (runtime.min_workers = K > 0): a forming world still short
// of N after runtime.replace_timeout_seconds forms with the workers it has,
// if they are at least K. A worker registering while such a smaller world
// runs waits for the next committed checkpoint, where the world breaks on
// purpose and re-forms larger. Every change of size is logged, written to
// metrics.jsonl and kept in the store (WorldHistory).
// A stop request picks s = (furthest reported step) + margin and sends
// "stop at s" to every worker; the workers agree on it in their per-step
// scalar all-reduce. The job is done when every worker reports finished.
#ifndef SHARDLINE_COORDINATOR_JOB_H_
#define SHARDLINE_COORDINATOR_JOB_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/platform/env.h"
#include "common/observability/metrics_writer.h"
#include "common/platform/mutex.h"
#include "coordinator/decide/checkpoint_book.h"
#include "coordinator/checkpoint_catalog.h"
#include "coordinator/disk_writer.h"
#include "coordinator/job_store.h"
#include "coordinator/decide/membership.h"
#include "coordinator/decide/report_rules.h"
#include "proto/config.pb.h"
#include "proto/coordinator.pb.h"

namespace shardline {

struct CoordinatorOptions {
  // Slots (runtime.num_workers): the world starts when all have registered,
  // or, when elastic, with at least runtime.min_workers of them.
  int world_size = 1;
  // Where workers save checkpoint shards and the coordinator commits them
  // (<workdir>/checkpoints). Empty: no checkpoints.
  std::string checkpoint_root;
  // Required: checkpoint files, and the clock every membership decision
  // reads (heartbeat deadlines, the checkpoint.every_seconds period).
  Env* env = nullptr;
  // A worker silent for this long is lost. Workers report every 100 ms.
  absl::Duration heartbeat_timeout = absl::Seconds(5);
  // Where workers write traced steps (train.trace_steps); empty: nowhere.
  std::string trace_dir;
  // The job token, from which each registration's park tags are derived
  // (RegisterResponse.park_tags); empty: none.
  std::string token;
  // A graceful stop was requested before this start (launch restarting a
  // coordinator that died during one): the first world that forms stops
  // after one step, saving, instead of running on.
  bool stop_requested = false;
  // Every disk write (RocksDB records, commits, metric records) on one
  // thread of the job's own (coordinator/disk_writer.h), never on the
  // caller's: what the coordinator process sets. False: on the calling
  // thread, after the lock is released (unit tests that step the job).
  bool disk_thread = false;
};

coordinator::JobStatus::State ToProto(JobState state);

class Job {
 public:
  // `store` and `metrics` must outlive the job.
  Job(config::JobConfig config, JobStore* store, MetricsSink* metrics, CoordinatorOptions options);

  // Returns once every disk write queued so far (options.disk_thread) has
  // run. Not from the disk thread.
  void FlushDisk() {
    if (writer_ != nullptr) writer_->Drain();
  }

  // Loads (or creates) the job id and the last generation from the store,
  // finishes any commit a crash interrupted, deletes uncommitted checkpoint
  // directories, and finds the latest committed checkpoint.
  absl::Status Init();

  // Blocks until the world this worker joins is complete. Once the job is
  // over, returns at once a response with job_over set (and job_error if it
  // failed). Fails with kAlreadyExists if the requested rank is held by a
  // live worker, kResourceExhausted if every rank is, kCancelled if
  // `cancelled()` turns true, kAborted if the world formed without this
  // worker (register again).
  // Implemented over StartRegister; asks `cancelled` every 100 ms.
  absl::StatusOr<coordinator::RegisterResponse> Register(const coordinator::RegisterRequest& request,
                                                         const std::function<bool()>& cancelled);

  // Register without holding a thread while the world forms (the gRPC
  // service's way): `done` is called exactly once, with what Register
  // would return, from this call or later from CompleteRegistrations or
  // CancelRegistration - never with the job's lock held. Returns an id
  // for CancelRegistration.
  using RegisterDone = std::function<void(absl::StatusOr<coordinator::RegisterResponse>)>;
  uint64_t StartRegister(const coordinator::RegisterRequest& request, RegisterDone done);
  // The caller went away: a registration still waiting gives up its claim
  // and its `done` gets kCancelled. Nothing if it was already answered.
  void CancelRegistration(uint64_t id);
  // Answers the waiting registrations whose world is ready, or whose job
  // ended. Call after changes and often; it costs nothing while nothing
  // they wait for has changed.
  void CompleteRegistrations();
  // Returns once the commands some heartbeat stream would be sent may have
  // changed since version *seen (a stop, checkpoint or eval step; a new
  // generation; an eviction; the job's state), or after `timeout`; *seen
  // becomes the current version. For one thread that serves every stream.
  void AwaitCommandNews(uint64_t* seen, absl::Duration timeout);

  // A heartbeat report. Returns an error (ending the stream) if it is from a
  // generation or rank that is not running.
  absl::Status Report(const coordinator::WorkerReport& report);

  // Waits up to `wait` for news for the stream of (rank, generation): a stop
  // step other than last.stop_at(), the world moving on, or the job's end.
  // Sets *end when the stream should end after sending what is returned (a
  // new generation to join; job_done once every worker finished; nothing if
  // the worker was evicted or the job failed).
  std::optional<coordinator::CoordinatorCommand> NextCommand(int rank, uint64_t generation,
                                                             const coordinator::CoordinatorCommand& last,
                                                             absl::Duration wait, bool* end);

  // The heartbeat stream of (rank, generation) ended.
  void StreamEnded(int rank, uint64_t generation, bool broken);

  // True if (rank, generation) is a member that reported finished: its
  // stream stays open, after the worker closed its side, until NextCommand
  // says job_done or a new generation.
  bool AwaitsJobEnd(int rank, uint64_t generation);

  // Declares workers silent past the heartbeat timeout lost. Call often.
  void CheckHeartbeats();

  // The coordinator itself did not run for a while (SIGSTOP, a stalled
  // host): reports could not be read, so silence over that time says
  // nothing about the workers. Every member's heartbeat deadline restarts
  // now.
  void RestartHeartbeatDeadlines(absl::Duration stalled);

  // Graceful stop (SIGTERM): stop at a step ahead of every worker.
  void RequestStop(const std::string& why);

  // checkpoint.every_seconds: when that long has passed since the last
  // commit (or the world's start), asks every worker to save at a step
  // ahead of all of them. Call often.
  void MaybeRequestCheckpoint();

  // "Checkpoint now" (SIGUSR2): every worker saves at a step ahead of all,
  // committed as any other checkpoint. FailedPrecondition when the job has
  // no checkpoint directory or no running world.
  absl::Status RequestCheckpoint();

  // "Eval now" (SIGUSR1): every worker evaluates at a step ahead of all.
  void RequestEval();

  // Waits until the job is done (and durably recorded as done) or failed,
  // or `wait` passes.
  bool AwaitEnd(absl::Duration wait);
  // > 0 if Init found this job (this config) already finished, at that
  // step: a coordinator restarted after the end has nothing to wait for.
  int64_t FinishedAtStart();
  // OK once every worker finished; the failure otherwise.
  absl::Status final_status();

  // A consistent copy of the job's state, for progress lines, metrics and
  // the Status RPC.
  coordinator::JobStatus Snapshot();

  // CoordinatorOptions::env: the job's clock and files.
  Env* env() const { return options_.env; }
  const std::string& job_id() const { return job_id_; }

 private:
  // The forming world's restore from memory (coordinator/decide/restore_plan.h,
  // the pure rule) with this job's state: its step, 0 if from disk. Sets
  // memory_sources_ and memory_world_.
  int64_t PlanSnapshotRestore() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Ends the running generation: every member is told to re-register.
  // Disk work decided under mu_ and done after it is released, so a slow
  // disk never holds up heartbeats or registration.
  struct Deferred {
    std::vector<BookCommit> commits;
    int64_t bad_step = 0;  // 0: none
    std::string bad_reason;
  };
  // Commits and marks `later` holds, then PersistState: on the disk thread
  // (queued; returns at once) or here. `wait`: returns only once done.
  void RunDeferred(Deferred later, bool wait = false) ABSL_LOCKS_EXCLUDED(mu_);
  void RunDeferredNow(const Deferred& later) ABSL_LOCKS_EXCLUDED(mu_);
  // Makes the state durable and writes the metric records waiting: queued
  // to the disk thread (once: a queued persist covers later changes too,
  // and answers the registrations waiting for it), or here.
  void PersistState() ABSL_LOCKS_EXCLUDED(mu_);
  // Writes the generation and global step (synced) if they changed since the
  // last write; then durable_generation_ follows. Takes mu_ only briefly.
  void PersistStateNow() ABSL_LOCKS_EXCLUDED(mu_);
  // Writes pending_records_ to metrics_, outside mu_.
  void WriteRecords() ABSL_LOCKS_EXCLUDED(mu_);
  // PersistStateNow, then WriteRecords: what every persist does.
  void PersistAndWriteNow() ABSL_LOCKS_EXCLUDED(mu_);
  absl::Time Now() const;  // options_.env's clock

  absl::Status ReportLocked(const coordinator::WorkerReport& r, Deferred* later) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The report's numerics fingerprint judged against the job's
  // (decide/numerics.h) and the verdict applied: recorded (persisted with
  // the world history), or the job failed. False when refused.
  bool NumericsAcceptedLocked(const coordinator::WorkerReport& r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // ReportLocked's parts: whether the report may act (its member, secret,
  // bounds and checkpoint), the member's progress and clock, a checkpoint
  // it found bad, and its metric records.
  absl::Status CheckReportLocked(const coordinator::WorkerReport& r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void NoteProgressLocked(const coordinator::WorkerReport& r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void BadCheckpointLocked(const coordinator::WorkerReport& r, Deferred* later) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void NoteMetricsLocked(const coordinator::WorkerReport& r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A registration that waits: for the world it joins to be formed and
  // durable (slot >= 0), or, a member that finished, for its world to move
  // on (waits_for_end).
  struct Parked {
    coordinator::RegisterRequest req;
    RegisterDone done;
    std::string secret;
    bool waits_for_end = false;
    uint64_t finished_in = 0;
    int slot = -1;
    uint64_t target = 0;
  };
  // A registration's resent finished report (`finished_report`), taken as
  // if it came on the stream, if it is of the running generation.
  void TakeFinishedReportLocked(const coordinator::RegisterRequest& req, Deferred* later)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Registration from the top (again after a wait for the job's end): the
  // answer, or nullopt with `p` set up to wait.
  std::optional<absl::StatusOr<coordinator::RegisterResponse>> AdmitLocked(Parked& p)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The running generation's members in rank order: what every answer to a
  // registration lists (peers, and the tags each must present).
  struct MemberBook {
    uint64_t generation = 0;
    std::vector<std::string> addresses;
    std::vector<std::string> secrets;
    // Islands (collective.islands): their size, for the peers; 0: none.
    int island_size = 0;
  };
  // The answer to a registration whose world is ready, but for its peers
  // and peer tags: those come from *book after the lock is released
  // (FillPeers), since the tags cost one HMAC per listed peer per answer.
  // FillPeers lists the ranks of DataPlanePeers (worker/collective/
  // peer_set.h), so an answer is O(log N).
  // A claim taken for a generation that formed without it (its island was
  // not whole: runtime.min_islands): still pending, for a later one.
  bool StillPendingLocked(const Parked& p) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<coordinator::RegisterResponse> FinishRegistrationLocked(const Parked& p,
                                                                         std::shared_ptr<const MemberBook>* book)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static void FillPeers(const MemberBook& book, const std::string& token, coordinator::RegisterResponse* resp);
  // Every worker saves at a step ahead of all of them (the command's
  // checkpoint_at); logs "<why>: every worker saves after step S".
  void ScheduleCheckpointLocked(const char* why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The version AwaitCommandNews compares.
  uint64_t CommandVersionLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs the membership state machine (membership.h) on `event` and applies
  // what it decided: a broken world's bookkeeping, a formed world's restore
  // plan, logs and crash points. Returns the effects for the caller's part
  // (a claim's answer, a stop's step).
  MembershipEffects StepLocked(const MembershipEvent& event) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnBrokenLocked(const MembershipEffects::Broken& broken) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnFormedLocked(const MembershipEffects::Formed& formed) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool elastic() const { return config_.runtime().min_workers() > 0 || config_.runtime().min_islands() > 0; }
  // The smallest world an elastic job forms: "3 workers", "1 whole island".
  std::string ElasticFloor() const;
  void RecordWorldChangeLocked(int from, const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Fail(absl::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The checkpoint book's decision (checkpoint_book.h) for `event`, applied:
  // commits and bad marks into `later` (null: none can follow), a broken
  // world, a failed job, the reason logged.
  void BookStepLocked(const BookEvent& event, Deferred* later) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // True when the stream of (rank, generation) has nothing more to carry
  // but, possibly, the news of a new generation.
  bool StreamOver(int rank, uint64_t generation) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const config::JobConfig config_;
  const std::string config_text_;
  JobStore* const store_;
  MetricsSink* const metrics_;
  const CoordinatorOptions options_;
  const MembershipConfig membership_config_;
  std::string job_id_;
  CheckpointCatalog catalog_;

  Mutex persist_mu_;  // one PersistState at a time; taken before mu_
  Mutex mu_;
  // Bumped whenever the generation or the job's end changes; persisted_version_
  // is the last one written. A generation's members hear of it only once
  // durable_generation_ has reached it.
  uint64_t state_version_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t persisted_version_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t durable_generation_ ABSL_GUARDED_BY(mu_) = 0;
  // Every worker finished and the store says so (written before any worker
  // is told); at start: the store said so for this very config.
  bool finished_durable_ ABSL_GUARDED_BY(mu_) = false;
  std::string last_disruption_ ABSL_GUARDED_BY(mu_);
  // Slots, members, generations and the job's state (membership.h); changed
  // only by StepLocked, but for the members' telemetry.
  Membership m_ ABSL_GUARDED_BY(mu_);
  bool finished_at_start_ ABSL_GUARDED_BY(mu_) = false;
  int64_t finished_step_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status final_ ABSL_GUARDED_BY(mu_);
  // Saves in progress and failed, and the reason of the last decision
  // about them (checkpoint_book.h).
  CheckpointBook checkpoints_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, Parked> parked_ ABSL_GUARDED_BY(mu_);  // by registration id
  std::shared_ptr<const MemberBook> book_ ABSL_GUARDED_BY(mu_);  // of generation_, made on first use
  uint64_t next_registration_ ABSL_GUARDED_BY(mu_) = 1;
  // What the waiting registrations were last checked against.
  uint64_t checked_durable_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t checked_generation_ ABSL_GUARDED_BY(mu_) = 0;
  JobState checked_state_ ABSL_GUARDED_BY(mu_) = JobState::kForming;
  bool recheck_ ABSL_GUARDED_BY(mu_) = true;
  int64_t stop_at_ ABSL_GUARDED_BY(mu_) = 0;             // 0: none
  int64_t checkpoint_at_ ABSL_GUARDED_BY(mu_) = 0;       // 0: none
  int64_t eval_at_ ABSL_GUARDED_BY(mu_) = 0;             // 0: none
  absl::Time last_save_time_ ABSL_GUARDED_BY(mu_);
  // A step ahead of every worker: furthest reported + half a second of steps.
  int64_t StepAheadLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int64_t total_steps_ ABSL_GUARDED_BY(mu_) = 0;         // as reported by rank 0
  int64_t losses_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t start_step_ ABSL_GUARDED_BY(mu_) = 0;  // the running generation's restore point
  // The running generation restores start_step_ from memory (snapshot_step_
  // == start_step_ > 0), its shard r coming from rank memory_sources_[r].
  int64_t snapshot_step_ ABSL_GUARDED_BY(mu_) = 0;
  int memory_world_ ABSL_GUARDED_BY(mu_) = 0;  // the world the snapshot was taken in
  std::vector<int> memory_sources_ ABSL_GUARDED_BY(mu_);
  coordinator::WorldHistory history_ ABSL_GUARDED_BY(mu_);
  bool history_dirty_ ABSL_GUARDED_BY(mu_) = false;
  std::set<int64_t> bad_memory_steps_ ABSL_GUARDED_BY(mu_);
  int64_t memory_recoveries_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t disk_recoveries_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t furthest_step_ ABSL_GUARDED_BY(mu_) = 0;  // any member ever reported
  int64_t steps_redone_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t nonfinite_losses_ ABSL_GUARDED_BY(mu_) = 0;
  // Wall clock (for people and alerts, not decisions): the last commit, or
  // this coordinator's start.
  absl::Time last_commit_time_ ABSL_GUARDED_BY(mu_);
  // Islands: rank 0's outer steps in the running generation (reset when one forms).
  std::optional<coordinator::OuterStepStatus> outer_ ABSL_GUARDED_BY(mu_);
  // Rank 0's latest train record, the latest eval and the best
  // (decide/report_rules.h: NoteEvals).
  EvalsSeen evals_ ABSL_GUARDED_BY(mu_);
  // Rank 0's step rate, for the stop margin (decide/report_rules.h).
  StepRate rate_ ABSL_GUARDED_BY(mu_);
  // Metric records decided under mu_, written by WriteRecords after it.
  std::vector<metrics::MetricRecord> pending_records_ ABSL_GUARDED_BY(mu_);
  bool persist_queued_ ABSL_GUARDED_BY(mu_) = false;
  // Commits decided (ShardSaved) and not yet tried (RunDeferredNow): the
  // job's end waits for them (PersistStateNow).
  int commits_pending_ ABSL_GUARDED_BY(mu_) = 0;
  // Last: destroyed first, running what is queued while the rest exists.
  std::unique_ptr<DiskWriter> writer_;
};

}  // namespace shardline

#endif  // SHARDLINE_COORDINATOR_JOB_H_
