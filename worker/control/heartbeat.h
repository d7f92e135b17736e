// One generation's heartbeat stream to the coordinator: the worker's
// progress, metric records and saved shards go out every `interval`; the
// coordinator's decisions come in (stop, checkpoint and eval steps, a new
// generation).
//
//   HeartbeatOptions o;
//   o.rank = world.rank();  o.generation = world.generation();  o.stop_at = world.stop_at();
//   o.on_abandon = [&](const std::string& why) { transport->Shutdown(); };
//   Heartbeat hb(client.stub(), o);
//   options.stop_request = hb.stop_request();  options.metrics = hb.outbox();
//   ... RunTraining ...
//   hb.Close({.finished = true});
#ifndef SHARDLINE_WORKER_CONTROL_HEARTBEAT_H_
#define SHARDLINE_WORKER_CONTROL_HEARTBEAT_H_

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/platform/env.h"
#include "common/platform/mutex.h"
#include "proto/coordinator.grpc.pb.h"
#include "worker/control/outbox.h"

namespace shardline {

struct HeartbeatOptions {
  Env* env = nullptr;  // required: the clock of the reports' send times
  int rank = 0;
  uint64_t generation = 0;
  // The stop step the coordinator handed out at registration (kNoStep: none).
  int64_t stop_at = 0;
  // Time between reports. The coordinator's heartbeat deadline must be
  // several of these.
  absl::Duration interval = absl::Milliseconds(100);
  // How long Close() waits for the coordinator to end the stream after the
  // last report; then it cancels the stream (a paused or cut-off
  // coordinator must not keep a finished worker waiting forever).
  absl::Duration close_timeout = absl::Seconds(10);
  // Called once, on a reader or sender thread, when the generation is
  // abandoned: the coordinator moved to a new generation or the stream
  // broke (not when it ends after saying the job is done). Must make the
  // training loop fail fast (shut the transport down).
  std::function<void(const std::string& why)> on_abandon;
  // RegisterResponse.member_secret: sent with every report.
  std::string member_secret;
  // The proof header the stream opens with (CoordinatorClient::Proof); "":
  // none (a job without a token).
  std::string proof;
};

// The last report of a generation. At most one of the outcomes is set; none:
// the worker leaves without a verdict (the coordinator treats it as lost).
struct LastReport {
  bool finished = false;             // the run completed
  std::string fatal_error;           // a failure a restart would repeat: fails the job
  int64_t diverged_step = 0;         // > 0: that failure is the loss going non-finite at this step
  int64_t bad_memory_step = 0;       // > 0: the in-memory snapshot of that step could not be restored here
  int64_t bad_checkpoint_step = 0;   // > 0: that checkpoint failed verification here
  std::string bad_checkpoint_reason;
  int64_t save_failed_step = 0;      // > 0: writing this rank's shard of that step failed
  std::string save_failure;
  absl::StatusCode save_failure_code = absl::StatusCode::kOk;
  std::string left_reason;           // non-empty: leaving because the world broke around it
};

// Thread-safe. The stream opens in the constructor (the first report tells
// the coordinator of it) and is cancelled by the destructor if not closed.
class Heartbeat {
 public:
  Heartbeat(coordinator::Coordinator::StubInterface* stub, HeartbeatOptions options);
  ~Heartbeat();

  // The coordinator's decisions, as the training loop reads them.
  std::atomic<int64_t>* stop_request() { return &stop_request_; }
  std::atomic<int64_t>* checkpoint_request() { return &checkpoint_request_; }
  std::atomic<int64_t>* eval_request() { return &eval_request_; }
  // Written by the training loop; reported as progress.
  std::atomic<int64_t>* steps_done() { return &steps_done_; }
  void set_total_steps(int64_t total) { total_steps_ = total; }
  // Metric records and saved shards to send with the next report.
  Outbox* outbox() { return &outbox_; }

  // Where this process's time went in the generation, and its mean busy
  // seconds per step: sent with every report from now on (goodput and
  // straggler accounting).
  void SetTime(const coordinator::TimeAccount& account, double busy_seconds_per_step);
  // Islands: the outer steps so far, sent with every later report.
  void SetOuter(const coordinator::OuterStepStatus& outer);

  // The watchdog's complaint, sent with every report from now on; the
  // coordinator then treats this worker as lost.
  void ReportStuck(const std::string& what);

  // Sends `last`, closes the stream and waits (at most close_timeout) for
  // the coordinator to end it. Returns UNAVAILABLE if the report could not
  // be delivered, DEADLINE_EXCEEDED if the coordinator did not end the
  // stream in time (the report may or may not have arrived). With
  // last.finished, OK means the coordinator said the whole job is done
  // (every worker finished); ABORTED if it ended the stream without saying
  // so (the world broke before every worker finished). `wait` shortens the
  // wait below close_timeout (a worker leaving a broken world does not
  // wait on a cut-off coordinator). Call once.
  absl::Status Close(const LastReport& last, absl::Duration wait = absl::InfiniteDuration());

  // Why the generation was abandoned ("" if it was not).
  std::string abandoned();

  // The finished report once more, for a registration after Close() could
  // not confirm the job's end: progress, `finished`, and the last shards
  // this generation saved (the coordinator may have missed them with the
  // report). No metric records: they were sent once and may have arrived.
  coordinator::WorkerReport FinishedReportToResend();

 private:
  void SendLoop();
  void ReadLoop();
  // Who this is (rank, generation, secret) and how far it got.
  coordinator::WorkerReport Progress() const;
  bool SendReport(const LastReport& last);
  void Abandon(const std::string& why);

  const HeartbeatOptions options_;
  std::atomic<int64_t> stop_request_;
  std::atomic<int64_t> steps_done_{0};
  std::atomic<int64_t> checkpoint_request_{0};
  std::atomic<int64_t> eval_request_{0};
  std::atomic<int64_t> total_steps_{0};
  std::atomic<bool> job_done_{false};
  Outbox outbox_;

  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReaderWriterInterface<coordinator::WorkerReport, coordinator::CoordinatorCommand>>
      stream_;

  Mutex mu_;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  std::string abandoned_ ABSL_GUARDED_BY(mu_);
  std::string stuck_ ABSL_GUARDED_BY(mu_);
  coordinator::TimeAccount time_ ABSL_GUARDED_BY(time_mu_);
  double busy_seconds_per_step_ ABSL_GUARDED_BY(time_mu_) = 0;
  std::optional<coordinator::OuterStepStatus> outer_ ABSL_GUARDED_BY(time_mu_);
  mutable Mutex time_mu_;
  // The last kResendShards shards reported, oldest first.
  static constexpr int kResendShards = 8;
  std::vector<coordinator::SavedShard> recent_saved_ ABSL_GUARDED_BY(mu_);
  Mutex write_mu_;  // one writer on the stream at a time

  Notification read_done_;  // the coordinator ended the stream (or it broke)
  std::thread sender_;
  std::thread reader_;
};

}  // namespace shardline

#endif  // SHARDLINE_WORKER_CONTROL_HEARTBEAT_H_
