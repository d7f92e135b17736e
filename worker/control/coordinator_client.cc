#include "worker/control/coordinator_client.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "common/net/grpc_util.h"
#include "common/platform/logging.h"
#include "common/platform/clock.h"

namespace shardline {
namespace {

ProofClient::HelloFn HelloOn(coordinator::Coordinator::Stub* stub, bool wait_for_ready) {
  return [stub, wait_for_ready](int rank, const std::string& client_nonce,
                                absl::Time deadline) -> absl::StatusOr<HelloAnswer> {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(deadline));
    ctx.set_wait_for_ready(wait_for_ready);
    coordinator::HelloRequest request;
    request.set_rank(rank);
    request.set_client_nonce(client_nonce);
    coordinator::HelloReply reply;
    const grpc::Status s = stub->Hello(&ctx, request, &reply);
    if (!s.ok()) return FromGrpcStatus(s);
    return HelloAnswer{reply.server_nonce(), reply.server_proof()};
  };
}

}  // namespace

CoordinatorClient::CoordinatorClient(Env* env, const std::string& address, const RpcAuth* auth)
    : env_(env),
      address_(address),
      auth_(auth),
      stub_(coordinator::Coordinator::NewStub(grpc::CreateCustomChannel(
          address, auth != nullptr ? auth->ChannelCredentials() : grpc::InsecureChannelCredentials(),
          ControlChannelArguments()))),
      proof_(auth, absl::StrCat("the coordinator at ", address), HelloOn(stub_.get(), /*wait_for_ready=*/true)) {}

absl::StatusOr<coordinator::RegisterResponse> CoordinatorClient::Register(
    const coordinator::RegisterRequest& request, absl::Duration give_up_after) {
  const absl::Time give_up = WallNow(env_) + give_up_after;
  absl::Duration backoff = absl::Milliseconds(100);
  bool renewed = false;
  for (;;) {
    absl::Status s;
    coordinator::RegisterResponse response;
    // The handshake waits at most a few seconds, so an unreachable
    // coordinator is retried (and logged) below like a failed Register.
    if (absl::StatusOr<std::string> header = proof_.Header(coordinator::RegisterRequest::descriptor()->full_name(),
                                                                  std::min(give_up, WallNow(env_) + absl::Seconds(5)));
        !header.ok()) {
      s = header.status();
    } else {
      grpc::ClientContext ctx;
      if (!header->empty()) ctx.AddMetadata(kProofMetadataKey, *header);
      s = FromGrpcStatus(stub_->Register(&ctx, request, &response));
    }
    if (s.ok()) return response;
    if (absl::IsUnauthenticated(s) && !renewed && proof_.Forget()) {
      renewed = true;
      continue;
    }
    const bool retry = absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s) || absl::IsAlreadyExists(s) ||
                       absl::IsAborted(s) || absl::IsResourceExhausted(s);
    if (absl::IsUnauthenticated(s)) {
      return absl::UnauthenticatedError(absl::StrCat("the coordinator at ", address_,
                                                     " refused this worker's credential: ", s.message()));
    }
    if (!retry) return s;
    if (WallNow(env_) + backoff > give_up) {
      return absl::Status(s.code(), absl::StrCat("registering with the coordinator at ", address_, " failed for ",
                                                 absl::FormatDuration(give_up_after), ": ", s.message()));
    }
    if (absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s)) {
      SLOG(INFO) << "coordinator at " << address_ << " unreachable; retrying in " << absl::FormatDuration(backoff);
    } else {
      SLOG(INFO) << "registration refused (" << s.message() << "); retrying in " << absl::FormatDuration(backoff);
    }
    env_->SleepForMicros(absl::ToInt64Microseconds(backoff));
    backoff = std::min(backoff * 2, absl::Seconds(1));
  }
}

absl::StatusOr<coordinator::JobStatus> CoordinatorClient::Status(absl::Duration timeout, bool wait_for_ready) {
  const absl::Time deadline = WallNow(env_) + timeout;
  for (int attempt = 0;; ++attempt) {
    absl::StatusOr<std::string> header = proof_.Header(coordinator::StatusRequest::descriptor()->full_name(), deadline);
    if (!header.ok()) return header.status();
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(deadline));
    ctx.set_wait_for_ready(wait_for_ready);
    if (!header->empty()) ctx.AddMetadata(kProofMetadataKey, *header);
    coordinator::JobStatus status;
    const grpc::Status s = stub_->Status(&ctx, coordinator::StatusRequest(), &status);
    if (s.ok()) return status;
    if (s.error_code() == grpc::StatusCode::UNAUTHENTICATED && attempt == 0 && proof_.Forget()) continue;
    return FromGrpcStatus(s);
  }
}

}  // namespace shardline
