// The Coordinator gRPC service on gRPC's callback API: checks each call's
// job token, then translates RPCs into Job calls and nothing else. No call
// holds a thread while it waits: a registration waits for its world inside
// the Job (Job::StartRegister), and heartbeat streams are served by
// HeartbeatStreams (one pump thread for all of them).
#ifndef SHARDLINE_COORDINATOR_SERVICE_H_
#define SHARDLINE_COORDINATOR_SERVICE_H_

#include <functional>

#include "common/rpc_auth.h"
#include "coordinator/heartbeat_streams.h"
#include "coordinator/job.h"
#include "proto/coordinator.grpc.pb.h"

namespace shardline {

class CoordinatorService final : public coordinator::Coordinator::CallbackService {
 public:
  // `auth` (null: no token checks) must outlive the service. `status`
  // answers the Status RPC (thread-safe); null: job->Snapshot(). The
  // server must be shut down before the service is destroyed.
  explicit CoordinatorService(Job* job, RpcAuth* auth = nullptr,
                              std::function<coordinator::JobStatus()> status = nullptr)
      : job_(job), auth_(auth), status_(std::move(status)), streams_(job, auth) {}

  // Answered once the world this worker joins is formed and durable, or at
  // once with an error; a caller that goes away gives up its claim.
  grpc::ServerUnaryReactor* Register(grpc::CallbackServerContext* ctx, const coordinator::RegisterRequest* request,
                                     coordinator::RegisterResponse* response) override;

  // Reports in, commands out; the stream ending, for any reason, is
  // reported to the Job.
  grpc::ServerBidiReactor<coordinator::WorkerReport, coordinator::CoordinatorCommand>* Heartbeat(
      grpc::CallbackServerContext* ctx) override;

  grpc::ServerUnaryReactor* Status(grpc::CallbackServerContext* ctx, const coordinator::StatusRequest* request,
                                   coordinator::JobStatus* response) override;

  // Heartbeat streams open now.
  size_t open_streams() { return streams_.open(); }

 private:
  Job* job_;
  RpcAuth* auth_;
  std::function<coordinator::JobStatus()> status_;
  HeartbeatStreams streams_;
};

}  // namespace shardline

#endif  // SHARDLINE_COORDINATOR_SERVICE_H_
