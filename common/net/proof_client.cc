#include "common/net/proof_client.h"

#include "absl/strings/str_cat.h"
#include "common/platform/status_macros.h"
#include "common/platform/clock.h"

namespace shardline {

ProofClient::ProofClient(const RpcAuth* auth, std::string server, HelloFn hello)
    : auth_(auth), server_(std::move(server)), hello_(std::move(hello)) {}

absl::StatusOr<std::string> ProofClient::Header(absl::string_view method, absl::Time deadline) {
  if (auth_ == nullptr || !auth_->enabled()) return std::string();
  const Credential& credential = auth_->credential();
  {
    MutexLock lock(&mu_);
    const bool fresh = WallNow(auth_->env()) - made_ < absl::Microseconds(kProofSessionMaxAgeMicros / 2);
    if (!session_.client_nonce.empty() && fresh) {
      reused_ = true;
      CallProof p = session_;
      p.seq = next_seq_++;
      p.proof = ClientProof(credential.key, p.client_nonce, p.server_nonce, method, p.seq);
      return FormatCallProof(p);
    }
  }
  ASSIGN_OR_RETURN(const std::string client_nonce, NewNonce());
  const absl::Time started = WallNow(auth_->env());
  absl::StatusOr<HelloAnswer> answer = hello_(credential.rank, client_nonce, deadline);
  if (!answer.ok()) {
    return absl::Status(answer.status().code(),
                        absl::StrCat("starting a session with ", server_, ": ", answer.status().message()));
  }
  if (!SecretEquals(answer->server_proof, ServerProof(credential.key, client_nonce, answer->server_nonce))) {
    return absl::UnauthenticatedError(absl::StrCat(
        server_, " did not prove it holds this job's ",
        credential.rank < 0 ? std::string("token") : absl::StrCat("rank ", credential.rank, " credential"),
        "; nothing was sent to it. Either it is not this job's coordinator (a stale address, another job "
        "on the port) or this process was given another job's credential"));
  }
  CallProof p;
  p.rank = credential.rank;
  p.client_nonce = client_nonce;
  p.server_nonce = answer->server_nonce;
  p.seq = 0;
  p.proof = ClientProof(credential.key, client_nonce, answer->server_nonce, method, p.seq);
  MutexLock lock(&mu_);
  session_ = p;
  next_seq_ = 1;
  made_ = started;
  reused_ = false;
  return FormatCallProof(p);
}

absl::Status ProofClient::Attach(grpc::ClientContext* ctx, absl::string_view method, absl::Time deadline) {
  ASSIGN_OR_RETURN(const std::string header, Header(method, deadline));
  if (!header.empty()) ctx->AddMetadata(kProofMetadataKey, header);
  return absl::OkStatus();
}

bool ProofClient::Forget() {
  MutexLock lock(&mu_);
  const bool worth_retrying = reused_ && !session_.client_nonce.empty();
  session_ = CallProof();
  reused_ = false;
  return worth_retrying;
}

}  // namespace shardline
