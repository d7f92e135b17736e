// The coordinator's heartbeat streams on gRPC's callback API: a stream holds
// no thread. Reports are handed to the Job on whatever gRPC thread read
// them; commands are written by one pump thread for every stream, woken by
// the Job when a command may have changed (Job::AwaitCommandNews), which
// also answers the registrations waiting for their world
// (Job::CompleteRegistrations). The coordinator's thread count is then
// gRPC's fixed pool plus one, at any number of workers.
//
//   HeartbeatStreams streams(&job, auth);
//   ... CallbackService::Heartbeat returns streams.NewStream(ctx) ...
#ifndef SHARDLINE_COORDINATOR_HEARTBEAT_STREAMS_H_
#define SHARDLINE_COORDINATOR_HEARTBEAT_STREAMS_H_

#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "common/rpc_auth.h"
#include "coordinator/job.h"
#include "grpcpp/grpcpp.h"
#include "proto/coordinator.grpc.pb.h"

namespace shardline {

class HeartbeatStream;

class HeartbeatStreams {
 public:
  // `job` and `auth` (null: no token checks) must outlive this object.
  HeartbeatStreams(Job* job, RpcAuth* auth);
  // Stops the pump; every stream must have ended (the server shut down).
  ~HeartbeatStreams();

  // The reactor of a new Heartbeat call. It checks the token, hands each
  // report to the Job, and ends with the Job told (StreamEnded) how.
  grpc::ServerBidiReactor<coordinator::WorkerReport, coordinator::CoordinatorCommand>* NewStream(
      grpc::CallbackServerContext* ctx);

  // Streams open now (for tests and metrics).
  size_t open();

 private:
  friend class HeartbeatStream;
  void Add(HeartbeatStream* s);
  // Called from the stream's OnDone: it is freed by the pump, never while
  // a sweep may still hold it.
  void Retire(HeartbeatStream* s);
  void Pump();

  Job* const job_;
  RpcAuth* const auth_;
  Mutex mu_;
  std::set<HeartbeatStream*> live_ ABSL_GUARDED_BY(mu_);
  std::vector<HeartbeatStream*> retired_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread pump_;
};

}  // namespace shardline

#endif  // SHARDLINE_COORDINATOR_HEARTBEAT_STREAMS_H_
