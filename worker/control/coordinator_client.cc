#include "worker/control/coordinator_client.h"

#include "absl/strings/str_cat.h"
#include "common/grpc_util.h"
#include "common/logging.h"

namespace shardline {

CoordinatorClient::CoordinatorClient(const std::string& address, const RpcAuth* auth)
    : address_(address), auth_(auth) {
  stub_ = coordinator::Coordinator::NewStub(
      grpc::CreateCustomChannel(address, auth != nullptr ? auth->ChannelCredentials() : grpc::InsecureChannelCredentials(),
                                ControlChannelArguments()));
}

absl::StatusOr<coordinator::RegisterResponse> CoordinatorClient::Register(
    const coordinator::RegisterRequest& request, absl::Duration give_up_after) {
  const absl::Time give_up = absl::Now() + give_up_after;
  absl::Duration backoff = absl::Milliseconds(100);
  for (;;) {
    grpc::ClientContext ctx;
    if (auth_ != nullptr) auth_->Attach(&ctx);
    coordinator::RegisterResponse response;
    const absl::Status s = FromGrpcStatus(stub_->Register(&ctx, request, &response));
    if (s.ok()) return response;
    const bool retry = absl::IsUnavailable(s) || absl::IsAlreadyExists(s) || absl::IsAborted(s) ||
                       absl::IsResourceExhausted(s);
    if (absl::IsUnauthenticated(s)) {
      return absl::UnauthenticatedError(absl::StrCat("the coordinator at ", address_,
                                                     " refused this worker's job token: ", s.message()));
    }
    if (!retry) return s;
    if (absl::Now() + backoff > give_up) {
      return absl::Status(s.code(), absl::StrCat("registering with the coordinator at ", address_, " failed for ",
                                                 absl::FormatDuration(give_up_after), ": ", s.message()));
    }
    if (absl::IsUnavailable(s)) {
      SLOG(INFO) << "coordinator at " << address_ << " unreachable; retrying in " << absl::FormatDuration(backoff);
    } else {
      SLOG(INFO) << "registration refused (" << s.message() << "); retrying in " << absl::FormatDuration(backoff);
    }
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, absl::Seconds(1));
  }
}

}  // namespace shardline
