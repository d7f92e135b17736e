#include "worker/collective/peer_fault.h"

#include <string>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"

namespace shardline {
namespace {

constexpr char kPeerFaultUrl[] = "type.shardline/peer_fault_rank";

}  // namespace

absl::Status PeerFaultError(int rank, absl::string_view message) {
  absl::Status s = absl::InternalError(message);
  s.SetPayload(kPeerFaultUrl, absl::Cord(std::to_string(rank)));
  return s;
}

int PeerFaultRank(const absl::Status& status) {
  const auto payload = status.GetPayload(kPeerFaultUrl);  // absl::optional<absl::Cord>
  int rank = -1;
  if (!payload.has_value() || !absl::SimpleAtoi(std::string(*payload), &rank)) return -1;
  return rank;
}

}  // namespace shardline
