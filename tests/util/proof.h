// Proofs for calls a test makes by hand to a coordinator, as an honest
// client or an attacker would make them (common/net/auth_proof.h).
#ifndef SHARDLINE_TESTS_UTIL_PROOF_H_
#define SHARDLINE_TESTS_UTIL_PROOF_H_

#include <string>

#include "grpcpp/grpcpp.h"

namespace shardline {

// The methods a proof is made for (their request messages' full names).
std::string RegisterMethod();
std::string StatusMethod();
std::string HeartbeatMethod();
// The method of a "/shardline.coordinator.Coordinator/Name" path.
std::string MethodOfPath(const std::string& path);

// The proof header for one call of `method` with `secret` (the job token, a
// rank's or a reader's credential text) made with the coordinator at
// `address`: a Hello, then the client proof of call 0 of that session. The
// server's proof is not checked (an attacker would not check it). "" for an
// empty secret or if the Hello fails.
std::string ProofHeader(const std::string& address, const std::string& secret, const std::string& method);

// Adds ProofHeader(address, secret, method) to `ctx` unless it is "".
void AddProof(grpc::ClientContext* ctx, const std::string& address, const std::string& secret,
              const std::string& method);

}  // namespace shardline

#endif  // SHARDLINE_TESTS_UTIL_PROOF_H_
