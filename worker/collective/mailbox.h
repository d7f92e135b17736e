// Where arriving messages wait for their Recv: keyed by (source rank, tag),
// with per-source "gone" marks so a Recv from a dead peer fails at once
// instead of waiting for its deadline. Shared by the in-process and gRPC
// transports. Thread-safe.
#ifndef SHARDLINE_WORKER_COLLECTIVE_MAILBOX_H_
#define SHARDLINE_WORKER_COLLECTIVE_MAILBOX_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/status/statusor.h"
#include "worker/collective/payload.h"

namespace shardline {

class Mailbox {
 public:
  explicit Mailbox(int world_size);

  // Delivers a message from `src`. Dropped after Shutdown.
  void Put(int src, uint64_t tag, std::unique_ptr<Payload> payload);

  // Marks `src` gone: pending and future Takes from it fail with kUnavailable
  // and `why` (messages it already delivered can still be taken).
  void MarkGone(int src, const std::string& why);

  // Fails every pending and future Take whose message is not already here
  // with kUnavailable and `why`: the world is broken (another rank saw a
  // peer die), so waiting for any peer is pointless.
  // Returns true for the first poison only.
  bool Poison(const std::string& why);

  // Waits until the message (src, tag) is here and hands it over.
  absl::StatusOr<std::unique_ptr<Payload>> Take(int src, uint64_t tag, absl::Time deadline);

  // Fails everything with kAborted from now on.
  void Shutdown();

  int world_size() const { return world_size_; }
  bool poisoned();

 private:
  const int world_size_;
  absl::Mutex mu_;
  std::map<std::pair<int, uint64_t>, std::unique_ptr<Payload>> messages_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> gone_ ABSL_GUARDED_BY(mu_);  // per source; empty = alive
  std::string poison_ ABSL_GUARDED_BY(mu_);  // empty = healthy
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace shardline

#endif  // SHARDLINE_WORKER_COLLECTIVE_MAILBOX_H_
