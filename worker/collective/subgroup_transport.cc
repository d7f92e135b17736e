#include "worker/collective/subgroup_transport.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/platform/logging.h"

namespace shardline {

absl::StatusOr<std::unique_ptr<SubgroupTransport>> SubgroupTransport::Create(Transport* base, std::vector<int> members,
                                                                              int space) {
  if (space < 1 || space >= kMaxSpaces) {
    return absl::InvalidArgumentError(absl::StrCat("a group's tag space is 1..", kMaxSpaces - 1, ", not ", space));
  }
  const std::set<int> distinct(members.begin(), members.end());
  if (distinct.size() != members.size() || members.empty() || *distinct.begin() < 0 ||
      *distinct.rbegin() >= base->world_size()) {
    return absl::InvalidArgumentError(absl::StrCat("a group's members must be distinct ranks of the world of ",
                                                   base->world_size()));
  }
  const auto me = std::find(members.begin(), members.end(), base->rank());
  if (me == members.end()) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", base->rank(), " is not a member of its own group"));
  }
  const int rank = static_cast<int>(me - members.begin());
  return std::unique_ptr<SubgroupTransport>(new SubgroupTransport(base, std::move(members), rank, space));
}

uint64_t SubgroupTransport::Tag(uint64_t tag) const {
  SCHECK((tag >> (64 - kSpaceBits)) == 0) << "tag " << tag << " uses a group's space bits";
  return (space_ << (64 - kSpaceBits)) | tag;
}

absl::Status SubgroupTransport::Send(int peer, uint64_t tag, absl::Span<const char> data, absl::Time deadline) {
  return base_->Send(world_rank(peer), Tag(tag), data, deadline);
}

absl::StatusOr<std::unique_ptr<Payload>> SubgroupTransport::Receive(int peer, uint64_t tag, absl::Time deadline) {
  return base_->Receive(world_rank(peer), Tag(tag), deadline);
}

absl::Status SubgroupTransport::ExpectReceive(int peer, uint64_t tag,
                                              std::function<absl::Status(std::unique_ptr<Payload>)> handler) {
  return base_->ExpectReceive(world_rank(peer), Tag(tag), std::move(handler));
}

absl::Status SubgroupTransport::AwaitReceive(int peer, uint64_t tag, absl::Time deadline) {
  return base_->AwaitReceive(world_rank(peer), Tag(tag), deadline);
}

}  // namespace shardline
