// Point-to-point transport between the ranks of one world generation, in the
// spirit of Gloo's transport::Pair: tagged sends and receives of byte spans,
// each bounded by a deadline. The collective algorithms (ring.h) see only
// this interface and never include gRPC headers.
//
//   RETURN_IF_ERROR(t->Send(next, tag, bytes, deadline));
//   RETURN_IF_ERROR(t->Recv(prev, tag, absl::MakeSpan(buffer), deadline));
//
// Errors always name the peer rank:
//   kUnavailable       the peer's stream closed or broke (it died, or left)
//   kDeadlineExceeded  nothing arrived from the peer before the deadline
//   kAborted           this transport was shut down (a new generation began)
// A rank whose Recv fails with kUnavailable or kDeadlineExceeded tells every
// other rank, whose pending and later Recvs then fail with kUnavailable and
// the same message (naming the failed peer and the reporting rank): one dead
// rank fails the whole world within milliseconds, not a deadline each.
#ifndef SHARDLINE_WORKER_COLLECTIVE_TRANSPORT_H_
#define SHARDLINE_WORKER_COLLECTIVE_TRANSPORT_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace shardline {

class Transport {
 public:
  virtual ~Transport() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;

  // Queues `data` (copied before returning) for `peer` under `tag`. Returns
  // once queued; delivery is in order per (sender, receiver) pair. Fails if
  // the connection to the peer is known to be broken.
  virtual absl::Status Send(int peer, uint64_t tag, absl::Span<const char> data,
                            absl::Time deadline) = 0;

  // Waits for the message `peer` sent under `tag` and copies it into `data`,
  // whose size must equal the message's (kInternal naming both sizes if not).
  // Messages with other tags that arrive meanwhile are kept for their Recv.
  virtual absl::Status Recv(int peer, uint64_t tag, absl::Span<char> data,
                            absl::Time deadline) = 0;

  // Fails every pending and future Send/Recv with kAborted. Idempotent.
  virtual void Shutdown() = 0;
};

}  // namespace shardline

#endif  // SHARDLINE_WORKER_COLLECTIVE_TRANSPORT_H_
