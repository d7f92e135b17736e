// The gRPC transport: each worker process runs one TransportServer for its
// whole life (its address is what the coordinator hands out), and connects a
// new Transport for every world generation.
//
// Data path: a sender keeps one long-lived client stream (Transport.Push)
// per peer, fed by its own thread, so Send returns as soon as the frame is
// queued and sending overlaps the caller's reduction. The receiving server
// (gRPC's callback API) delivers each frame into the generation's Mailbox on
// the gRPC thread that read it, and runs a posted receive's handler right
// there, while the bytes are in that core's cache. When a peer's stream breaks
// (the process died, the connection reset) every Recv from it fails at once
// with kUnavailable naming it, and this rank tells every other rank, so the
// whole world fails fast instead of waiting for deadlines.
//
//   ASSIGN_OR_RETURN(auto server, TransportServer::Start("0.0.0.0:0"));
//   ... tell the coordinator server->port() ...
//   ASSIGN_OR_RETURN(auto transport, server->Connect(generation, rank, peer_addresses));
//   RingCollectives ring(transport.get(), options);
#ifndef SHARDLINE_WORKER_COLLECTIVE_GRPC_TRANSPORT_H_
#define SHARDLINE_WORKER_COLLECTIVE_GRPC_TRANSPORT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/net/rpc_auth.h"
#include "worker/collective/transport.h"

namespace shardline {

struct TransportServerOptions {
  // HTTP/2 keepalive on every data-plane connection, both directions: a peer
  // whose process stops answering (SIGSTOP, a hung host, a partition) fails
  // its connections within about keepalive_time + keepalive_timeout, even
  // while no operation waits on it directly. The timeout must exceed the
  // longest time a live process can go without answering a ping: one
  // process hosting 16 ranks under AddressSanitizer on 2 cores missed the
  // 2 s default (its in-process ring tests use a longer one).
  absl::Duration keepalive_time = absl::Seconds(1);
  absl::Duration keepalive_timeout = absl::Seconds(2);
  // The largest data-plane frame accepted (gRPC's receive limit on this
  // server): a segment (CollectiveOptions::max_segment_bytes, 1 MiB by
  // default) plus its header. Larger messages are refused by gRPC and end
  // the sender's stream.
  int max_frame_bytes = (1 << 20) + (64 << 10);
  // How long closing a generation may wait for a peer to take what is still
  // queued to it and end the stream (a frozen peer, a full window); what is
  // left is then cancelled.
  absl::Duration drain_timeout = absl::Seconds(5);
  // The same bound for a generation that failed, whose streams carry only
  // its failure reports (queued data is dropped). A peer in the generation
  // ends a stream as soon as it reads the report; a dead one, or a
  // restarted process that never joined the generation, is not waited for,
  // except a restarted process already holding the stream's data for a
  // generation it will never reach: that waits this long. At most
  // drain_timeout.
  absl::Duration report_grace = absl::Milliseconds(500);
  // How long a stream of a generation this process has not joined yet may
  // wait for it (peers can start a generation a little before us); then it
  // is refused, whether or not other streams arrive.
  absl::Duration generation_wait = absl::Seconds(30);
  // This process's credential (the job token or its rank's): TLS for every
  // connection, and the key a stream's park tag is checked with (a stream
  // for a generation this process has not joined waits for it only with
  // the park tag the coordinator gave its sender). Refusals are counted
  // through it. Null: none. Must outlive the server. No job secret is sent
  // on the data plane.
  RpcAuth* auth = nullptr;
  // Runs for every connection the server's gate closes unserved, with its
  // reason (common/net/connection_gate.h); null: nothing.
  std::function<void(const char* reason)> on_connection_refused;
};

// Membership of one generation, from the coordinator's RegisterResponse:
// streams this rank opens carry MemberTag(secret, generation, receiver), and
// a stream from rank s is accepted only with peer_tags[s] ("" for a rank that
// is not a data-plane peer). Empty: no check (tests and benchmarks that have
// no coordinator).
struct MemberKeys {
  std::string secret;
  std::vector<std::string> peer_tags;
  // Empty, or world_size entries: the park tag (RegisterResponse.park_tags)
  // this rank's stream to each peer carries.
  std::vector<std::string> park_tags;
};

struct ConnectOptions {
  MemberKeys keys;
  // Bytes of frames from one peer that may wait for a receive nobody has
  // posted yet. A peer runs at most about one collective ahead, so twice
  // the model's bytes is ample; past the cap the peer is faulty: its frame
  // is dropped and the world fails naming it (RESOURCE_EXHAUSTED).
  int64_t max_unclaimed_bytes_per_peer = int64_t{1} << 30;
  // The same for the number of such frames (an empty frame costs memory
  // too). A collective sends a few segments per peer; tests with
  // byte-sized segments send thousands.
  int64_t max_unclaimed_frames_per_peer = int64_t{1} << 16;
  // The largest world the job can have (runtime.num_workers; an elastic
  // world shrinks and grows back to it). While this generation is current,
  // a stream for a later one from a rank at or past it is refused, never
  // parked: a token holder cannot fill the park slots with ranks no world
  // has. 0: this world's size.
  int max_world_size = 0;
};

class TransportServer {
 public:
  // Listens on `listen` ("HOST:PORT"; port 0 picks one). The options apply
  // to the server and to every connection its transports open.
  // `env` (the clock of every deadline) must outlive the server.
  static absl::StatusOr<std::unique_ptr<TransportServer>> Start(Env* env, const std::string& listen,
                                                               const TransportServerOptions& options = {});
  ~TransportServer();

  int port() const;
  // Streams waiting for a generation this process has not joined.
  size_t parked_streams() const;

  // The transport of `rank` in generation `generation` (which must be larger
  // than any earlier one); peers[i] is rank i's "host:port", or "" for a rank
  // this one does not talk to (common/topology/peer_set.h): sends to and
  // receives from it fail (kFailedPrecondition) and its streams are refused
  // (PERMISSION_DENIED). Frames of older
  // generations are refused from then on. The server must outlive it.
  // With `keys`, only the processes that registered for this generation can
  // feed it: a stream speaking for a rank without its tag is refused
  // (PERMISSION_DENIED) before any frame is delivered.
  absl::StatusOr<std::unique_ptr<Transport>> Connect(uint64_t generation, int rank,
                                                     std::vector<std::string> peers, ConnectOptions options = {});

  class Impl;

 private:
  explicit TransportServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace shardline

#endif  // SHARDLINE_WORKER_COLLECTIVE_GRPC_TRANSPORT_H_
