#include "worker/collective/peer_fault.h"

#include "common/platform/status_payload.h"

namespace shardline {
namespace {

constexpr char kPeerFaultUrl[] = "type.shardline/peer_fault_rank";
constexpr char kUnresolvedUrl[] = "type.shardline/unresolved_mismatch";

}  // namespace

absl::Status PeerFaultError(int rank, absl::string_view message) {
  return WithIntPayload(absl::InternalError(message), kPeerFaultUrl, rank);
}

int PeerFaultRank(const absl::Status& status) { return static_cast<int>(IntPayload(status, kPeerFaultUrl)); }

absl::Status UnresolvedMismatchError(absl::string_view message) {
  return WithIntPayload(absl::InternalError(message), kUnresolvedUrl, 1);
}

bool IsUnresolvedMismatch(const absl::Status& status) { return IntPayload(status, kUnresolvedUrl) == 1; }

}  // namespace shardline
