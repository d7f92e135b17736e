#include "worker/control/peer_directory.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace shardline {

absl::StatusOr<PeerDirectory> ReadPeerDirectory(const coordinator::RegisterResponse& world) {
  const int n = world.world_size();
  const int listed = world.peers_size();
  if (n < 1 || world.rank() < 0 || world.rank() >= n) {
    return absl::InvalidArgumentError(absl::StrCat("the coordinator's answer puts rank ", world.rank(),
                                                   " in a world of ", n));
  }
  const bool dense = world.peer_ranks_size() == 0;
  if (dense ? listed != n : world.peer_ranks_size() != listed) {
    return absl::InvalidArgumentError(absl::StrCat("the coordinator's answer lists ", listed, " peers for ",
                                                   dense ? n : world.peer_ranks_size(),
                                                   dense ? " ranks (world_size)" : " peer_ranks"));
  }
  const bool tagged = world.peer_tags_size() > 0;
  if (tagged && world.peer_tags_size() != listed) {
    return absl::InvalidArgumentError(absl::StrCat("the coordinator's answer lists ", world.peer_tags_size(),
                                                   " peer_tags for ", listed, " peers"));
  }
  const bool parked = world.park_tags_size() > 0;
  if (parked && world.park_tags_size() != listed) {
    return absl::InvalidArgumentError(absl::StrCat("the coordinator's answer lists ", world.park_tags_size(),
                                                   " park_tags for ", listed, " peers"));
  }
  PeerDirectory d;
  if (parked) d.park_tags.assign(static_cast<size_t>(n), "");
  d.addresses.assign(static_cast<size_t>(n), "");
  if (tagged) d.tags.assign(static_cast<size_t>(n), "");
  for (int i = 0; i < listed; ++i) {
    const int r = dense ? i : world.peer_ranks(i);
    if (r < 0 || r >= n || !d.addresses[static_cast<size_t>(r)].empty()) {
      return absl::InvalidArgumentError(absl::StrCat("the coordinator's answer lists peer rank ", r,
                                                     " (peer_ranks[", i, "]) out of range or twice in a world of ", n));
    }
    if (world.peers(i).empty()) {
      return absl::InvalidArgumentError(absl::StrCat("the coordinator's answer has no address for peer rank ", r));
    }
    d.addresses[static_cast<size_t>(r)] = world.peers(i);
    if (tagged) d.tags[static_cast<size_t>(r)] = world.peer_tags(i);
    if (parked) d.park_tags[static_cast<size_t>(r)] = world.park_tags(i);
  }
  return d;
}

}  // namespace shardline
