// Point-to-point transport between the ranks of one world generation, in the
// spirit of Gloo's transport::Pair: tagged sends and receives of byte spans,
// each bounded by a deadline. The collective algorithms (ring.h) see only
// this interface and never include gRPC headers.
//
//   RETURN_IF_ERROR(t->Send(next, tag, bytes, deadline));
//   ASSIGN_OR_RETURN(std::unique_ptr<Payload> msg, t->Receive(prev, tag, deadline));
//   RETURN_IF_ERROR(t->Flush(deadline));   // before touching sent memory again
//
// A receive can also be posted ahead: the handler then runs on the thread
// that delivers the message, while its bytes are still in that core's cache.
//   RETURN_IF_ERROR(t->ExpectReceive(prev, tag, [dst](std::unique_ptr<Payload> p) {
//     return AddPayloadInto(*p, dst); }));
//   ... RETURN_IF_ERROR(t->AwaitReceive(prev, tag, deadline));
//
// Errors always name the peer rank:
//   kUnavailable       the peer's stream closed or broke (it died, or left)
//   kDeadlineExceeded  nothing arrived from the peer before the deadline
//   kAborted           this transport was shut down (a new generation began)
// A rank whose Receive fails with kUnavailable or kDeadlineExceeded tells
// every other rank, whose pending and later Receives then fail with kUnavailable and
// the same message (naming the failed peer and the reporting rank): one dead
// rank fails the whole world within milliseconds, not a deadline each.
#ifndef SHARDLINE_WORKER_COLLECTIVE_TRANSPORT_H_
#define SHARDLINE_WORKER_COLLECTIVE_TRANSPORT_H_

#include <cstdint>
#include <functional>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "worker/collective/payload.h"

namespace shardline {

class Transport {
 public:
  virtual ~Transport() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;

  // Queues `data` for `peer` under `tag` and returns. Delivery is in order
  // per (sender, receiver) pair. `data` may be referenced, not copied: it
  // must stay valid and unchanged until Flush returns. Fails if the
  // connection to the peer is known to be broken.
  virtual absl::Status Send(int peer, uint64_t tag, absl::Span<const char> data,
                            absl::Time deadline) = 0;

  // Waits for the message `peer` sent under `tag`. Messages with other tags
  // that arrive meanwhile are kept for their Receive.
  virtual absl::StatusOr<std::unique_ptr<Payload>> Receive(int peer, uint64_t tag,
                                                           absl::Time deadline) = 0;

  // Posts `handler` for the message `peer` sends under `tag` (instead of
  // Receive). It runs exactly once, on whatever thread delivers the message
  // (or in this call, if it is already here), unless CancelReceives or
  // Shutdown comes first.
  virtual absl::Status ExpectReceive(int peer, uint64_t tag,
                                     std::function<absl::Status(std::unique_ptr<Payload>)> handler) = 0;

  // Waits until the handler posted for (peer, tag) has run and returns its
  // status; fails as Receive does (naming the peer) if it cannot run.
  virtual absl::Status AwaitReceive(int peer, uint64_t tag, absl::Time deadline) = 0;

  // Drops the posted handlers that have not started and waits for running
  // ones; afterwards none runs. Call it before memory the handlers write
  // to goes away after a failure.
  virtual void CancelReceives() = 0;

  // Waits until no earlier Send's data is referenced any more (handed to
  // the OS, or dropped with a broken connection). However it returns, the
  // memory of earlier Sends is free afterwards. If the deadline passes, the
  // stuck streams are cancelled (the world is then broken) and the result
  // is kDeadlineExceeded.
  virtual absl::Status Flush(absl::Time deadline) = 0;

  // Fails every pending and future operation with kAborted. Idempotent.
  virtual void Shutdown() = 0;
};

// Receive + CopyPayloadInto: the message must be exactly out.size() bytes.
absl::Status RecvInto(Transport& transport, int peer, uint64_t tag, absl::Span<char> out,
                      absl::Time deadline);

}  // namespace shardline

#endif  // SHARDLINE_WORKER_COLLECTIVE_TRANSPORT_H_
