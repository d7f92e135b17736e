// Where arriving messages wait for their Recv: keyed by (source rank, tag),
// with per-source "gone" marks so a Recv from a dead peer fails at once
// instead of waiting for its deadline. Shared by the in-process and gRPC
// transports. Thread-safe.
#ifndef SHARDLINE_WORKER_COLLECTIVE_MAILBOX_H_
#define SHARDLINE_WORKER_COLLECTIVE_MAILBOX_H_

#include <climits>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/platform/mutex.h"
#include "worker/collective/payload.h"

namespace shardline {

// Runs on a message when it arrives; its status is what Await returns.
using ReceiveHandler = std::function<absl::Status(std::unique_ptr<Payload>)>;

class Mailbox {
 public:
  // At most `max_unclaimed_bytes_per_source` bytes, in at most
  // `max_unclaimed_messages_per_source` messages (empty ones cost memory
  // too), from one source may wait for a receive nobody has posted yet.
  explicit Mailbox(int world_size, int64_t max_unclaimed_bytes_per_source = INT64_MAX,
                   int64_t max_unclaimed_messages_per_source = INT64_MAX);

  // Delivers a message from `src`. Dropped after Shutdown. A message no
  // receive is posted for waits, unless the source's waiting bytes would
  // pass a cap: then it is dropped, `src` is marked gone (its Takes fail
  // naming why) and the result is RESOURCE_EXHAUSTED, for the transport to
  // treat the sender as faulty.
  absl::Status Put(int src, uint64_t tag, std::unique_ptr<Payload> payload);

  // Marks `src` gone: pending and future Takes from it fail with kUnavailable
  // and `why` (messages it already delivered can still be taken).
  void MarkGone(int src, const std::string& why);
  // True once MarkGone(src) was called.
  bool IsGone(int src);

  // Fails every pending and future Take whose message is not already here
  // with kUnavailable and `why`: the world is broken (another rank saw a
  // peer die), so waiting for any peer is pointless.
  // Returns true for the first poison only.
  bool Poison(const std::string& why);

  // Waits until the message (src, tag) is here and hands it over.
  absl::StatusOr<std::unique_ptr<Payload>> Take(int src, uint64_t tag, absl::Time deadline);

  // Registers `handler` for the message (src, tag). It runs in the Put that
  // delivers the message, on the delivering thread, so the bytes are used
  // while they are still in that core's cache; or here, if the message is
  // already in. At most one handler per (src, tag).
  void Expect(int src, uint64_t tag, ReceiveHandler handler);

  // Waits until the handler of (src, tag) has run and returns its status;
  // fails like Take if the message cannot come.
  absl::Status Await(int src, uint64_t tag, absl::Time deadline);

  // Forgets every handler that has not started and waits for those that
  // are running: afterwards no handler runs (their captures may go away).
  void CancelExpected();

  // Fails everything with kAborted from now on.
  void Shutdown();

  int world_size() const { return world_size_; }
  bool poisoned();

 private:
  const int world_size_;
  const int64_t max_unclaimed_;
  const int64_t max_unclaimed_messages_;
  Mutex mu_;
  struct Expected {
    ReceiveHandler handler;  // empty once started
    bool done = false;
    absl::Status status;
  };
  // Runs the handler of `it` on `payload` outside the lock.
  void Run(std::map<std::pair<int, uint64_t>, Expected>::iterator it, std::unique_ptr<Payload> payload)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Forgets the handlers that have not started (running ones stay).
  void DropUnstarted() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Why nothing more can come from `src` (empty if it still can).
  absl::Status Unreachable(int src, uint64_t tag) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::map<std::pair<int, uint64_t>, std::unique_ptr<Payload>> messages_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<int, uint64_t>, Expected> expected_ ABSL_GUARDED_BY(mu_);
  int running_ ABSL_GUARDED_BY(mu_) = 0;  // handlers running now
  std::vector<std::string> gone_ ABSL_GUARDED_BY(mu_);  // per source; empty = alive
  std::vector<int64_t> unclaimed_ ABSL_GUARDED_BY(mu_);  // per source: bytes in messages_
  std::vector<int64_t> unclaimed_count_ ABSL_GUARDED_BY(mu_);  // per source: messages in messages_
  std::string poison_ ABSL_GUARDED_BY(mu_);  // empty = healthy
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace shardline

#endif  // SHARDLINE_WORKER_COLLECTIVE_MAILBOX_H_
