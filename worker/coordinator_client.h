// A worker's connection to the coordinator: registration (with bounded
// retries) and, per generation, the heartbeat stream that carries the
// worker's progress and metric lines out and the coordinator's decisions in.
//
//   CoordinatorClient client("10.0.0.1:7000");
//   ASSIGN_OR_RETURN(auto world, client.Register(request, absl::Seconds(60)));
//   Heartbeat hb(&client, world.rank(), world.generation(), world.stop_at(),
//                [&] { transport->Shutdown(); });
//   options.stop_request = hb.stop_request();  options.steps_done = hb.steps_done();
//   ... RunTraining ...
//   hb.Finish(/*fatal_error=*/"");
#ifndef SHARDLINE_WORKER_COORDINATOR_CLIENT_H_
#define SHARDLINE_WORKER_COORDINATOR_CLIENT_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/metrics_writer.h"
#include "proto/coordinator.grpc.pb.h"
#include "worker/checkpoint/save_restore.h"

namespace shardline {

class CoordinatorClient {
 public:
  explicit CoordinatorClient(const std::string& address);
  const std::string& address() const { return address_; }
  coordinator::Coordinator::Stub* stub() { return stub_.get(); }

  // Registers, retrying with backoff (100 ms doubling to 1 s) while the
  // coordinator is unreachable, the requested rank is still held by a
  // predecessor being detected as lost, or the world formed without us, for
  // at most `give_up_after`. Then fails naming the coordinator's address.
  absl::StatusOr<coordinator::RegisterResponse> Register(const coordinator::RegisterRequest& request,
                                                         absl::Duration give_up_after);

 private:
  std::string address_;
  std::unique_ptr<coordinator::Coordinator::Stub> stub_;
};

// One generation's heartbeat stream. Reports every `interval` (steps done,
// queued metric lines and saved checkpoint shards); applies commands as they arrive: a stop step goes to
// stop_request(), a new generation (or a broken stream) calls `on_abandon`,
// which must make the training loop fail fast (shut the transport down).
// Also a MetricsSink: records written are sent with the next report.
class Heartbeat : public MetricsSink, public CheckpointSink {
 public:
  Heartbeat(CoordinatorClient* client, int rank, uint64_t generation, int64_t stop_at,
            std::function<void(const std::string& why)> on_abandon,
            absl::Duration interval = absl::Milliseconds(100));
  ~Heartbeat() override;

  std::atomic<int64_t>* stop_request() { return &stop_request_; }
  std::atomic<int64_t>* checkpoint_request() { return &checkpoint_request_; }
  std::atomic<int64_t>* eval_request() { return &eval_request_; }
  std::atomic<int64_t>* steps_done() { return &steps_done_; }
  void set_total_steps(int64_t total) { total_steps_ = total; }

  absl::Status Write(const metrics::MetricRecord& record) override;
  // Reported with the next heartbeat; the coordinator commits the step once
  // every rank's shard is in.
  absl::Status ShardSaved(int64_t step, int rank, int world, const WrittenShard& shard) override;

  // The watchdog's complaint, sent with every report from now on; the
  // coordinator then treats this worker as lost.
  void ReportStuck(const std::string& what);

  // Sends a last report (finished, or the fatal error, or the watchdog's
  // complaint), closes the stream and waits for the coordinator to end it.
  // Returns an error if the report could not be delivered.
  absl::Status Finish(const std::string& fatal_error = "", const std::string& watchdog = "");

  // Reports that the checkpoint of `step` failed verification here, then
  // closes the stream (the coordinator falls back to an older one).
  absl::Status ReportBadCheckpoint(int64_t step, const std::string& why);

  // Why the generation was abandoned ("" if it was not).
  std::string abandoned();

 private:
  void SendLoop();
  void ReadLoop();
  bool SendReport(bool finished, const std::string& fatal, const std::string& watchdog,
                  int64_t bad_step = 0, const std::string& bad_why = "");
  absl::Status Close(bool finished, const std::string& fatal, const std::string& watchdog, int64_t bad_step,
                     const std::string& bad_why);
  void Abandon(const std::string& why);

  const int rank_;
  const uint64_t generation_;
  const absl::Duration interval_;
  const std::function<void(const std::string&)> on_abandon_;
  std::atomic<int64_t> stop_request_;
  std::atomic<int64_t> steps_done_{0};
  std::atomic<int64_t> checkpoint_request_{0};
  std::atomic<int64_t> eval_request_{0};
  std::atomic<int64_t> total_steps_{0};

  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<coordinator::WorkerReport, coordinator::CoordinatorCommand>> stream_;

  absl::Mutex mu_;
  std::vector<metrics::MetricRecord> records_ ABSL_GUARDED_BY(mu_);
  std::vector<coordinator::SavedShard> saved_ ABSL_GUARDED_BY(mu_);
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  std::string abandoned_ ABSL_GUARDED_BY(mu_);
  std::string stuck_ ABSL_GUARDED_BY(mu_);
  absl::Mutex write_mu_;  // one writer on the stream at a time

  std::thread sender_;
  std::thread reader_;
};

}  // namespace shardline

#endif  // SHARDLINE_WORKER_COORDINATOR_CLIENT_H_
