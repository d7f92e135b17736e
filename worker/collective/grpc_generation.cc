#include "worker/collective/grpc_generation.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/net/rpc_auth.h"
#include "common/platform/clock.h"
#include "common/platform/logging.h"
#include "worker/collective/grpc_wire.h"

namespace shardline {

using grpc_wire::kPoisonTag;

absl::Status Generation::CheckPeer(int peer) const {
  if (peer < 0 || peer >= world_size()) {
    return absl::InvalidArgumentError(absl::StrCat("no rank ", peer, " in a world of ", world_size()));
  }
  if (!Knows(peer)) {
    return absl::FailedPreconditionError(absl::StrCat("rank ", peer, " is not among rank ", rank_,
                                                      "'s data-plane peers in generation ", generation_,
                                                      " (common/topology/peer_set.h)"));
  }
  return absl::OkStatus();
}

bool Generation::AcceptsSender(int src, const std::multimap<grpc::string_ref, grpc::string_ref>& metadata) const {
  if (keys_.peer_tags.empty()) return true;
  const auto it = metadata.find(kMemberTagMetadataKey);
  return it != metadata.end() &&
         SecretEquals(absl::string_view(it->second.data(), it->second.size()),
                      keys_.peer_tags[static_cast<size_t>(src)]);
}

PeerStream* Generation::Stream(int peer) {
  MutexLock lock(&mu_);
  return StreamLocked(peer);
}

absl::Status Generation::Flush(absl::Time deadline) {
  if (tracker_.WaitIdle(deadline)) return absl::OkStatus();
  const std::string why = absl::StrCat("rank ", rank_, " could not hand its data to its peers before the deadline");
  Fail(why);
  CancelAll();
  // The caller's memory may not be reused while gRPC holds a frame of it,
  // and cancelled streams give their frames back within a few seconds. If
  // they do not, waiting longer would wait forever (seen once: a crash
  // matrix cell whose rank had left its generation during Prepare), so the
  // process ends and its supervisor restarts it into the next world, which
  // resumes with the same bits.
  const absl::Duration patience = 4 * options_.drain_timeout + absl::Seconds(10);
  for (absl::Duration waited; !tracker_.WaitIdle(WallNow(env_) + absl::Seconds(5));) {
    waited += absl::Seconds(5);
    if (waited >= patience) {
      SLOG(FATAL) << "rank " << rank_ << ": frames of generation " << generation_
                  << " still held by gRPC " << absl::FormatDuration(waited)
                  << " after cancelling every stream (" << why
                  << "); ending the process so its supervisor restarts it into the next world";
    }
    SLOG(WARNING) << "frames still queued after cancelling the streams; waiting";
  }
  return absl::DeadlineExceededError(why);
}

void Generation::Shutdown() {
  std::vector<std::unique_ptr<PeerStream>> streams;
  bool failed;
  {
    MutexLock lock(&mu_);
    if (shutdown_) return;
    shutdown_ = true;
    failed = box_.poisoned();  // Spread poisons it under mu_
    streams.swap(streams_);
  }
  // A failed generation's streams carry nothing but failure reports.
  const absl::Duration budget =
      failed ? std::min(options_.report_grace, options_.drain_timeout) : options_.drain_timeout;
  for (auto& s : streams) {
    if (s != nullptr) s->BeginClose(budget);
  }
  for (auto& s : streams) {
    if (s != nullptr) s->FinishClose();
  }
  box_.Shutdown();
  // Closing serialised or dropped every queued frame.
  tracker_.WaitIdle(absl::InfiniteFuture());
}

void Generation::Spread(const std::string& why, bool found_here) {
  MutexLock lock(&mu_);
  if (!box_.Poison(why)) return;
  if (found_here) SLOG(WARNING) << "collective failed: " << why << "; telling its peers";
  for (int peer = 0; peer < world_size(); ++peer) {
    // A peer whose stream broke cannot be told; a stream opened to it now
    // (a dead or frozen process) would only hold Shutdown until its drain
    // timeout.
    if (peer == rank_ || !Knows(peer) || box_.IsGone(peer)) continue;
    OutFrame frame;
    frame.src_rank = rank_;
    frame.generation = generation_;
    frame.tag = kPoisonTag;
    frame.owned = why;
    if (PeerStream* s = StreamLocked(peer, PeerStream::Purpose::kReport)) s->Abandon(std::move(frame));
  }
}

void Generation::CancelAll() {
  MutexLock lock(&mu_);
  for (auto& s : streams_) {
    if (s != nullptr) s->Cancel();
  }
}

PeerStream* Generation::StreamLocked(int peer, PeerStream::Purpose purpose) {
  if (shutdown_) return nullptr;
  auto& s = streams_[static_cast<size_t>(peer)];
  if (s == nullptr) {
    const std::string tag = keys_.secret.empty() ? "" : MemberTag(keys_.secret, generation_, peer);
    const std::string park =
        keys_.park_tags.empty() ? "" : absl::StrCat(peer, ".", keys_.park_tags[static_cast<size_t>(peer)]);
    s = std::make_unique<PeerStream>(peer, peers_[static_cast<size_t>(peer)], options_, env_, tag, park, purpose,
                                     [this, peer](const std::string& why) {
      box_.MarkGone(peer, why);
      Fail(absl::StrCat("peer rank ", peer, " is gone: ", why, " (reported by rank ", rank_, ")"));
    });
  }
  return s.get();
}

}  // namespace shardline
