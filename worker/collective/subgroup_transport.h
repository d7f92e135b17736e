// A group of some ranks of a world, as a world of its own over the same
// transport: the islands of a DiLoCo job (collective.islands,
// docs/collectives.md "Islands") are a ring inside each island and a ring
// across them, both over the generation's one set of connections.
//
// Member i of the group is world rank members[i]; this process is the
// member whose world rank is the base's rank(). Tags are the base's with
// the group's `space` in the top bits, so two groups that share a pair of
// ranks never take each other's messages. Failures are the base's (a peer
// named by its world rank, as in every log line), and a broken world fails
// every group over it.
//
//   SubgroupTransport island(transport.get(), {2, 3}, /*space=*/1);
//   RingCollectives ring(&island, options);   // rank 0 or 1 of 2
#ifndef SHARDLINE_WORKER_COLLECTIVE_SUBGROUP_TRANSPORT_H_
#define SHARDLINE_WORKER_COLLECTIVE_SUBGROUP_TRANSPORT_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/collective/transport.h"

namespace shardline {

class SubgroupTransport : public Transport {
 public:
  // The tag bits a space takes: spaces 0..kMaxSpaces-1 (0 is the world's own
  // collectives; a group gives a nonzero one).
  static constexpr int kSpaceBits = 3;
  static constexpr int kMaxSpaces = 1 << kSpaceBits;

  // `members` are distinct world ranks, one of them base->rank(); `space` in
  // [1, kMaxSpaces). InvalidArgument otherwise. `base` outlives the group.
  static absl::StatusOr<std::unique_ptr<SubgroupTransport>> Create(Transport* base, std::vector<int> members,
                                                                    int space);

  int rank() const override { return rank_; }
  int world_size() const override { return static_cast<int>(members_.size()); }
  // The world rank of member `i`.
  int world_rank(int i) const { return members_[static_cast<size_t>(i)]; }

  absl::Status Send(int peer, uint64_t tag, absl::Span<const char> data, absl::Time deadline) override;
  absl::StatusOr<std::unique_ptr<Payload>> Receive(int peer, uint64_t tag, absl::Time deadline) override;
  absl::Status ExpectReceive(int peer, uint64_t tag,
                             std::function<absl::Status(std::unique_ptr<Payload>)> handler) override;
  absl::Status AwaitReceive(int peer, uint64_t tag, absl::Time deadline) override;
  // The base's: it drops and waits for every group's handlers alike.
  void CancelReceives() override { base_->CancelReceives(); }
  absl::Status Flush(absl::Time deadline) override { return base_->Flush(deadline); }
  void Shutdown() override { base_->Shutdown(); }

 private:
  SubgroupTransport(Transport* base, std::vector<int> members, int rank, int space)
      : base_(base), members_(std::move(members)), rank_(rank), space_(static_cast<uint64_t>(space)) {}
  // The base's tag of this group's `tag`, whose top kSpaceBits must be 0.
  uint64_t Tag(uint64_t tag) const;

  Transport* const base_;
  const std::vector<int> members_;
  const int rank_;
  const uint64_t space_;
};

}  // namespace shardline

#endif  // SHARDLINE_WORKER_COLLECTIVE_SUBGROUP_TRANSPORT_H_
