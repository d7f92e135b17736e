// The data-plane peers of one generation, as the coordinator's answer lists
// them (RegisterResponse peers / peer_tags / peer_ranks), laid out by rank
// for TransportServer::Connect.
#ifndef SHARDLINE_WORKER_CONTROL_PEER_DIRECTORY_H_
#define SHARDLINE_WORKER_CONTROL_PEER_DIRECTORY_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/coordinator.pb.h"

namespace shardline {

struct PeerDirectory {
  // world_size entries: a listed rank's transport address, "" for a rank this
  // one does not talk to. This rank's own entry is its own address if listed.
  std::vector<std::string> addresses;
  // Empty if the answer carries no tags (no membership check); else
  // world_size entries, "" where `addresses` is "".
  std::vector<std::string> tags;
  // Empty if the answer carries no park tags (a job without a token); else
  // world_size entries: what this rank's streams to that rank carry.
  std::vector<std::string> park_tags;
};

// InvalidArgument, naming the field, when the lists disagree in length, a
// rank is out of range or listed twice, or an address is empty.
absl::StatusOr<PeerDirectory> ReadPeerDirectory(const coordinator::RegisterResponse& world);

}  // namespace shardline

#endif  // SHARDLINE_WORKER_CONTROL_PEER_DIRECTORY_H_
