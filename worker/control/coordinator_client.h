// A worker's channel to the coordinator, and registration with bounded
// retries. Each generation's heartbeat stream (control/heartbeat.h) runs on
// the same channel.
//
//   CoordinatorClient client("10.0.0.1:7000");
//   ASSIGN_OR_RETURN(coordinator::RegisterResponse world, client.Register(request, absl::Seconds(60)));
//   Heartbeat hb(client.stub(), heartbeat_options);
#ifndef SHARDLINE_WORKER_CONTROL_COORDINATOR_CLIENT_H_
#define SHARDLINE_WORKER_CONTROL_COORDINATOR_CLIENT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/rpc_auth.h"
#include "proto/coordinator.grpc.pb.h"

namespace shardline {

class CoordinatorClient {
 public:
  // `auth` (null: no token) must outlive the client; every call carries its
  // token.
  explicit CoordinatorClient(const std::string& address, const RpcAuth* auth = nullptr);
  const RpcAuth* auth() const { return auth_; }
  const std::string& address() const { return address_; }
  coordinator::Coordinator::Stub* stub() { return stub_.get(); }

  // Registers, retrying with backoff (100 ms doubling to 1 s) while the
  // coordinator is unreachable, the requested rank is still held by a
  // predecessor being detected as lost, or the world formed without us, for
  // at most `give_up_after`. Then fails naming the coordinator's address.
  // A refused token (UNAUTHENTICATED) fails at once.
  absl::StatusOr<coordinator::RegisterResponse> Register(const coordinator::RegisterRequest& request,
                                                         absl::Duration give_up_after);

 private:
  std::string address_;
  const RpcAuth* auth_;
  std::unique_ptr<coordinator::Coordinator::Stub> stub_;
};

}  // namespace shardline

#endif  // SHARDLINE_WORKER_CONTROL_COORDINATOR_CLIENT_H_
