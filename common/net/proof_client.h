// The client's half of the control-plane handshake (common/net/auth_proof.h):
// one Hello per session, then a proof on every call, and never the secret.
// A server that cannot prove it holds the same credential is told nothing.
//
//   ProofClient proof(&auth, "the coordinator at " + address,
//                     [&](int rank, const std::string& nonce, absl::Time deadline) { ...Hello RPC... });
//   grpc::ClientContext ctx;
//   RETURN_IF_ERROR(proof.Attach(&ctx, coordinator::StatusRequest::descriptor()->full_name(), deadline));
//   ... call; on UNAUTHENTICATED: if (proof.Forget()) retry once ...
#ifndef SHARDLINE_COMMON_NET_PROOF_CLIENT_H_
#define SHARDLINE_COMMON_NET_PROOF_CLIENT_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/platform/mutex.h"
#include "common/net/rpc_auth.h"
#include "grpcpp/grpcpp.h"

namespace shardline {

class ProofClient {
 public:
  // Sends a Hello(rank, client_nonce) to the server and returns its answer,
  // or the call's error, by `deadline`.
  using HelloFn =
      std::function<absl::StatusOr<HelloAnswer>(int rank, const std::string& client_nonce, absl::Time deadline)>;

  // `auth` (null or disabled: calls carry nothing) must outlive this;
  // `server` names the server in errors ("the coordinator at HOST:PORT").
  ProofClient(const RpcAuth* auth, std::string server, HelloFn hello);

  // The header for one call of `method` (its request message's full name),
  // starting a session first if there is none or it is half-way to
  // kProofSessionMaxAge. Each header is good for one call only (the server
  // refuses it a second time). "" without auth. UNAVAILABLE (and the like)
  // if the Hello fails; UNAUTHENTICATED naming the server if its answer does
  // not prove it holds our credential: then nothing was sent.
  absl::StatusOr<std::string> Header(absl::string_view method, absl::Time deadline);
  // Adds Header(method, deadline) to `ctx`.
  absl::Status Attach(grpc::ClientContext* ctx, absl::string_view method, absl::Time deadline);

  // Drops the session after a call was refused (UNAUTHENTICATED), so the
  // next Header() starts a new one. True if there was a session made before
  // the last Header() call that could have gone stale: only then is a retry
  // worth making (a brand new session that is refused stays refused).
  bool Forget();

 private:
  const RpcAuth* const auth_;
  const std::string server_;
  const HelloFn hello_;
  Mutex mu_;
  // The session: empty client_nonce while there is none.
  CallProof session_ ABSL_GUARDED_BY(mu_);
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time made_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  bool reused_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace shardline

#endif  // SHARDLINE_COMMON_NET_PROOF_CLIENT_H_
