// The Coordinator gRPC service: checks each call's job token, then
// translates RPCs into Job calls and nothing else. Every RPC runs on gRPC's
// asynchronous API, on CallQueues' fixed threads (with
// grpc.health.v1.Health beside it): no callback or synchronous method, so
// no other gRPC thread polls the sockets, and no call holds a thread while
// it waits - a registration waits for its world inside the Job
// (Job::StartRegister), a heartbeat stream between reports inside
// HeartbeatStreams.
//
//   CoordinatorService service(&job, auth);
//   ASSIGN_OR_RETURN(GrpcServer server, service.Listen(listen, server_options));
//   ...
//   server.server->Shutdown(deadline);
//   service.Stop();
#ifndef SHARDLINE_COORDINATOR_SERVICE_H_
#define SHARDLINE_COORDINATOR_SERVICE_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "common/net/grpc_util.h"
#include "common/net/rpc_auth.h"
#include "coordinator/call_queues.h"
#include "coordinator/heartbeat_streams.h"
#include "coordinator/job.h"
#include "proto/coordinator.grpc.pb.h"
#include "proto/health.grpc.pb.h"

namespace shardline {

struct CoordinatorServiceOptions {
  CallQueuesOptions queues;
  HeartbeatStreamsOptions streams;
  // Register calls each queue holds ready: a world of thousands registers
  // at once.
  int ready_registrations_per_queue = 32;
};

class CoordinatorService {
 public:
  // Register, Status and Check arrive as bytes, parsed after the caller's
  // proof is checked (unary_call.h); Heartbeat's reports are read only after
  // it. Hello needs no proof and is bounded to a few hundred bytes.
  using RpcService = coordinator::Coordinator::WithRawMethod_Hello<coordinator::Coordinator::WithRawMethod_Register<
      coordinator::Coordinator::WithRawMethod_Status<
          coordinator::Coordinator::WithAsyncMethod_Heartbeat<coordinator::Coordinator::Service>>>>;
  using HealthService = grpc::health::v1::Health::WithRawMethod_Check<
      grpc::health::v1::Health::WithAsyncMethod_Watch<grpc::health::v1::Health::Service>>;
  // `job` and `auth` (null: no token checks) must outlive the service.
  // `status` answers the Status RPC (thread-safe); null: job->Snapshot().
  explicit CoordinatorService(Job* job, RpcAuth* auth = nullptr,
                              std::function<coordinator::JobStatus()> status = nullptr,
                              CoordinatorServiceOptions options = {});
  // Stop()s if that was not done; the server must have been shut down.
  ~CoordinatorService();

  // Starts a server on `listen` with this service and its health service
  // (`options.configure` must be unset; gRPC's own health service is left
  // out) and serves calls.
  absl::StatusOr<GrpcServer> Listen(const std::string& listen, GrpcServerOptions options);

  // After the server's Shutdown has returned: ends the threads and frees
  // every call. Idempotent.
  void Stop();

  // Heartbeat streams open now.
  size_t open_streams() { return streams_.open(); }

 private:
  void ReadyCalls();

  Job* const job_;
  RpcAuth* const auth_;
  const std::function<coordinator::JobStatus()> status_;
  const CoordinatorServiceOptions options_;
  RpcService rpc_;
  HealthService health_;
  CallQueues queues_;
  HeartbeatStreams streams_;
  bool stopped_ = false;
};

}  // namespace shardline

#endif  // SHARDLINE_COORDINATOR_SERVICE_H_
