// The coordinator's heartbeat streams on gRPC's asynchronous API, served on
// CallQueues: a report is handed to the Job on the queue thread that read
// it; commands are written by one pump thread for every stream, woken by
// the Job when a command may have changed (Job::AwaitCommandNews), which
// also answers the registrations waiting for their world
// (Job::CompleteRegistrations). The coordinator's thread count is then the
// queues' threads plus one, at any number of workers.
//
//   HeartbeatStreams streams(&job, auth, &queues);
//   ... server started ...
//   streams.Start([&](auto* ctx, auto* rw, auto* cq, void* tag) {
//     service.RequestHeartbeat(ctx, rw, cq, cq, tag);
//   });
//   queues.Start();
//   ...
//   server->Shutdown(deadline);
//   streams.StopPump();
//   queues.Stop();
//   // ~HeartbeatStreams frees the streams
#ifndef SHARDLINE_COORDINATOR_HEARTBEAT_STREAMS_H_
#define SHARDLINE_COORDINATOR_HEARTBEAT_STREAMS_H_

#include <functional>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "common/platform/mutex.h"
#include "common/net/rpc_auth.h"
#include "coordinator/call_queues.h"
#include "coordinator/job.h"
#include "grpcpp/grpcpp.h"
#include "proto/coordinator.grpc.pb.h"

namespace shardline {

struct HeartbeatStreamsOptions {
  // Heartbeat calls each queue holds ready for new streams: more lets a
  // world of thousands connect faster (each takes a few KiB until used).
  int ready_per_queue = 32;
};

class HeartbeatStream;

class HeartbeatStreams {
 public:
  using ReaderWriter = grpc::ServerAsyncReaderWriter<coordinator::CoordinatorCommand, coordinator::WorkerReport>;
  // Asks gRPC for the next Heartbeat call on `cq` (the service's
  // RequestHeartbeat(ctx, rw, cq, cq, tag)).
  using RequestFn =
      std::function<void(grpc::ServerContext* ctx, ReaderWriter* rw, grpc::ServerCompletionQueue* cq, void* tag)>;

  // `job`, `auth` (null: no token checks) and `queues` must outlive this
  // object.
  HeartbeatStreams(Job* job, RpcAuth* auth, CallQueues* queues, HeartbeatStreamsOptions options = {});
  // Frees every stream: the pump and the queues must have stopped.
  ~HeartbeatStreams();

  // Once the server has started: readies calls on every queue and starts
  // the pump.
  void Start(RequestFn request);
  // Ends the pump (no write or registration answer starts from it after);
  // before the queues stop. Idempotent.
  void StopPump();

  // Streams open now (for tests and metrics).
  size_t open();

 private:
  friend class HeartbeatStream;
  // Readies a new call on `cq`, unless stopping.
  void Ready(grpc::ServerCompletionQueue* cq);
  void Add(HeartbeatStream* s);
  // Called once a stream has no operation left in flight: it is freed by
  // the pump (or Stop), never while a sweep may still hold it.
  void Retire(HeartbeatStream* s);
  void Pump();

  Job* const job_;
  RpcAuth* const auth_;
  CallQueues* const queues_;
  const HeartbeatStreamsOptions options_;
  RequestFn request_;
  std::thread pump_;

  Mutex mu_;
  std::set<HeartbeatStream*> all_ ABSL_GUARDED_BY(mu_);   // not yet retired
  std::set<HeartbeatStream*> live_ ABSL_GUARDED_BY(mu_);  // registered: polled
  std::vector<HeartbeatStream*> retired_ ABSL_GUARDED_BY(mu_);
  bool stop_pump_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace shardline

#endif  // SHARDLINE_COORDINATOR_HEARTBEAT_STREAMS_H_
