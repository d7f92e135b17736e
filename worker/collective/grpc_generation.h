// Everything of one world generation on this rank: its mailbox, its streams
// to peers and the rule that a failure found here reaches every rank.
// Internal to the gRPC transport (grpc_transport.h): shared by the
// Transport the caller holds and by the server that delivers into it.
#ifndef SHARDLINE_WORKER_COLLECTIVE_GRPC_GENERATION_H_
#define SHARDLINE_WORKER_COLLECTIVE_GRPC_GENERATION_H_

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/platform/mutex.h"
#include "grpcpp/grpcpp.h"
#include "worker/collective/grpc_peer_stream.h"
#include "worker/collective/grpc_transport.h"
#include "worker/collective/mailbox.h"

namespace shardline {

class Generation {
 public:
  Generation(uint64_t generation, int rank, std::vector<std::string> peers, ConnectOptions connect,
             const TransportServerOptions& options, Env* env)
      : generation_(generation), rank_(rank), peers_(std::move(peers)), keys_(std::move(connect.keys)),
        options_(options), env_(env), box_(static_cast<int>(peers_.size()), connect.max_unclaimed_bytes_per_peer,
             connect.max_unclaimed_frames_per_peer),
        streams_(peers_.size()),
        max_world_size_(std::max(connect.max_world_size, static_cast<int>(peers_.size()))) {}

  // True if `peer` is this rank or one of its data-plane peers: the ranks
  // it has an address (and a tag) for.
  bool Knows(int peer) const { return peer == rank_ || !peers_[static_cast<size_t>(peer)].empty(); }

  // Why `peer` cannot be talked to this generation, or OK.
  absl::Status CheckPeer(int peer) const;

  // True if a stream with `metadata` may speak for rank `src`, a known peer.
  bool AcceptsSender(int src, const std::multimap<grpc::string_ref, grpc::string_ref>& metadata) const;

  // The world is broken: fail every local Recv with `why`, and tell every
  // data-plane peer still reachable, which passes it on (Relay): the peers
  // include the ring's neighbours, so it reaches every rank, over the
  // doubling partners in about log2 N hops. Only the first failure is sent
  // on. Holding mu_ throughout keeps Shutdown (which a failed caller runs
  // next) from closing the streams before the reports are queued on them.
  void Fail(const std::string& why) { Spread(why, /*found_here=*/true); }

  // A peer's report that the world is broken: fail here too, and pass it on.
  void Relay(const std::string& why) { Spread(why, /*found_here=*/false); }

  uint64_t generation() const { return generation_; }
  int rank() const { return rank_; }
  int world_size() const { return static_cast<int>(peers_.size()); }
  // ConnectOptions::max_world_size, at least world_size().
  int max_world_size() const { return max_world_size_; }
  Mailbox& box() { return box_; }

  // The stream to `peer`, created on first use; null after Shutdown.
  PeerStream* Stream(int peer);

  SendTracker& tracker() { return tracker_; }

  // Waits for every referenced payload to be released; past the deadline,
  // cancels all streams (releasing everything) and fails the world.
  absl::Status Flush(absl::Time deadline);

  void Shutdown();

 private:
  void Spread(const std::string& why, bool found_here);

  // The stream to `peer`, opened for `purpose` if there is none yet; null
  // after Shutdown.
  PeerStream* StreamLocked(int peer, PeerStream::Purpose purpose = PeerStream::Purpose::kData)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  void CancelAll();

  const uint64_t generation_;
  const int rank_;
  const std::vector<std::string> peers_;
  const MemberKeys keys_;
  const TransportServerOptions options_;
  Env* const env_;
  Mailbox box_;
  SendTracker tracker_;
  Mutex mu_;
  std::vector<std::unique_ptr<PeerStream>> streams_ ABSL_GUARDED_BY(mu_);
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  const int max_world_size_;
};


}  // namespace shardline

#endif  // SHARDLINE_WORKER_COLLECTIVE_GRPC_GENERATION_H_
