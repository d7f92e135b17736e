// Proofs for calls a test makes by hand to a coordinator, as an honest
// client or an attacker would make them (common/net/auth_proof.h).
#ifndef SHARDLINE_TESTS_UTIL_PROOF_H_
#define SHARDLINE_TESTS_UTIL_PROOF_H_

#include <string>

#include "grpcpp/grpcpp.h"

namespace shardline {

// The proof header for `secret` (the job token or a rank credential's text)
// made with the coordinator at `address`: a Hello, then the client proof.
// The server's proof is not checked (an attacker would not check it). ""
// for an empty secret or if the Hello fails.
std::string ProofHeader(const std::string& address, const std::string& secret);

// Adds ProofHeader(address, secret) to `ctx` unless it is "".
void AddProof(grpc::ClientContext* ctx, const std::string& address, const std::string& secret);

}  // namespace shardline

#endif  // SHARDLINE_TESTS_UTIL_PROOF_H_
