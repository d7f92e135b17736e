// A peer fault: a rank of the world sent what no correct rank sends (today:
// non-finite numbers where the protocol carries finite ones). It is not a
// diverged run and not a dead peer: the world restarts from the last
// checkpoint, and the status names the rank so an operator (and the
// coordinator's log) can tell which host to look at.
//
// The rank travels as a status payload, so code decides on it without
// reading the message:
//   absl::Status s = PeerFaultError(3, "rank 3 sent a NaN in ...");
//   PeerFaultRank(s) == 3; PeerFaultRank(absl::UnavailableError("x")) == -1
#ifndef SHARDLINE_WORKER_COLLECTIVE_PEER_FAULT_H_
#define SHARDLINE_WORKER_COLLECTIVE_PEER_FAULT_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace shardline {

// kInternal (the world rejoins; it is not fatal) with `message`, carrying
// `rank`.
absl::Status PeerFaultError(int rank, absl::string_view message);

// The rank a PeerFaultError names, or -1 for any other status.
int PeerFaultRank(const absl::Status& status);

// kInternal (the world rejoins) for ranks that held or computed other bits
// where no rank can be named (two ranks, an even split, three results);
// told apart by IsUnresolvedMismatch, not by its wording.
absl::Status UnresolvedMismatchError(absl::string_view message);
bool IsUnresolvedMismatch(const absl::Status& status);

}  // namespace shardline

#endif  // SHARDLINE_WORKER_COLLECTIVE_PEER_FAULT_H_
