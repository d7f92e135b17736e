// The Coordinator gRPC service: checks each call's job token, then
// translates RPCs into Job calls and nothing else.
#ifndef SHARDLINE_COORDINATOR_SERVICE_H_
#define SHARDLINE_COORDINATOR_SERVICE_H_

#include <functional>

#include "common/rpc_auth.h"
#include "coordinator/job.h"
#include "proto/coordinator.grpc.pb.h"

namespace shardline {

class CoordinatorService final : public coordinator::Coordinator::Service {
 public:
  // `auth` (null: no token checks) must outlive the service. `status`
  // answers the Status RPC (thread-safe); null: job->Snapshot().
  explicit CoordinatorService(Job* job, RpcAuth* auth = nullptr,
                              std::function<coordinator::JobStatus()> status = nullptr)
      : job_(job), auth_(auth), status_(std::move(status)) {}

  grpc::Status Register(grpc::ServerContext* ctx, const coordinator::RegisterRequest* request,
                        coordinator::RegisterResponse* response) override;

  // Reads reports on the handler thread and writes commands from a second
  // thread; the stream ending, for any reason, is reported to the Job.
  grpc::Status Heartbeat(
      grpc::ServerContext* ctx,
      grpc::ServerReaderWriter<coordinator::CoordinatorCommand, coordinator::WorkerReport>* stream) override;

  grpc::Status Status(grpc::ServerContext* ctx, const coordinator::StatusRequest* request,
                      coordinator::JobStatus* response) override;

 private:
  grpc::Status Authenticate(const grpc::ServerContextBase& ctx) {
    return auth_ != nullptr ? auth_->Check(ctx) : grpc::Status::OK;
  }

  Job* job_;
  RpcAuth* auth_;
  std::function<coordinator::JobStatus()> status_;
};

}  // namespace shardline

#endif  // SHARDLINE_COORDINATOR_SERVICE_H_
