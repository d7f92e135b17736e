// A channel to the coordinator, for a worker or an operator's command: every
// call first proves this process holds the job token or its rank's
// credential (common/net/proof_client.h), and nothing is sent to a server that
// cannot prove it holds it too. Registration retries with bounded backoff.
// Each generation's heartbeat stream (control/heartbeat.h) runs on the same
// channel.
//
//   CoordinatorClient client(env, "10.0.0.1:7000", &auth);
//   ASSIGN_OR_RETURN(coordinator::RegisterResponse world, client.Register(request, absl::Seconds(60)));
//   hb_options.proof = client.proof();  // the session Register just used
//   Heartbeat hb(client.stub(), hb_options);
#ifndef SHARDLINE_WORKER_CONTROL_COORDINATOR_CLIENT_H_
#define SHARDLINE_WORKER_CONTROL_COORDINATOR_CLIENT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/net/proof_client.h"
#include "common/net/rpc_auth.h"
#include "proto/coordinator.grpc.pb.h"

namespace shardline {

class CoordinatorClient {
 public:
  // `auth` (null: no token) must outlive the client.
  // `env` (the clock of its deadlines and backoff) and `auth` (null: no
  // token) must outlive the client.
  CoordinatorClient(Env* env, const std::string& address, const RpcAuth* auth = nullptr);
  const RpcAuth* auth() const { return auth_; }
  const std::string& address() const { return address_; }
  coordinator::Coordinator::Stub* stub() { return stub_.get(); }

  // The proof header for one call of `method` made by hand (a heartbeat
  // stream: coordinator::WorkerReport's full name), from the current
  // session or a new one; "" without a token.
  absl::StatusOr<std::string> Proof(absl::string_view method, absl::Time deadline) {
    return proof_.Header(method, deadline);
  }

  // Registers, retrying with backoff (100 ms doubling to 1 s) while the
  // coordinator is unreachable, the requested rank is still held by a
  // predecessor being detected as lost, or the world formed without us, for
  // at most `give_up_after`. Then fails naming the coordinator's address.
  // A refused credential (UNAUTHENTICATED, PERMISSION_DENIED for another
  // rank's) fails at once; a session gone stale (a restarted coordinator
  // whose clock differs) is renewed once.
  absl::StatusOr<coordinator::RegisterResponse> Register(const coordinator::RegisterRequest& request,
                                                         absl::Duration give_up_after);

  // The job's status, within `timeout`; with `wait_for_ready`, a coordinator
  // still starting is waited for until then.
  absl::StatusOr<coordinator::JobStatus> Status(absl::Duration timeout, bool wait_for_ready);

 private:
  Env* const env_;
  std::string address_;
  const RpcAuth* auth_;
  std::unique_ptr<coordinator::Coordinator::Stub> stub_;
  ProofClient proof_;
};

}  // namespace shardline

#endif  // SHARDLINE_WORKER_CONTROL_COORDINATOR_CLIENT_H_
