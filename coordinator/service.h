// The Coordinator gRPC service: translates RPCs into Job calls and nothing
// else.
#ifndef SHARDLINE_COORDINATOR_SERVICE_H_
#define SHARDLINE_COORDINATOR_SERVICE_H_

#include "coordinator/job.h"
#include "proto/coordinator.grpc.pb.h"

namespace shardline {

class CoordinatorService final : public coordinator::Coordinator::Service {
 public:
  explicit CoordinatorService(Job* job) : job_(job) {}

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
  Job* job_;
};

}  // namespace shardline

#endif  // SHARDLINE_COORDINATOR_SERVICE_H_
