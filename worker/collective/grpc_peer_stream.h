// The sending end of the data plane: one long-lived Push stream to a peer,
// fed by its own thread. Internal to the gRPC transport (grpc_transport.h);
// a Generation (grpc_generation.h) owns one per peer it sends to.
#ifndef SHARDLINE_WORKER_COLLECTIVE_GRPC_PEER_STREAM_H_
#define SHARDLINE_WORKER_COLLECTIVE_GRPC_PEER_STREAM_H_

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/platform/mutex.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/impl/codegen/sync_stream.h"
#include "proto/transport.pb.h"
#include "worker/collective/grpc_frame.h"
#include "worker/collective/grpc_transport.h"

namespace shardline {

// One long-lived Push stream to a peer, fed by its own thread. On a write
// failure it calls on_broken(why) once, outside its lock.
//
// A data stream waits for the peer to accept it (wait_for_ready): the peer
// may still be starting. A stream opened only to report a failure does not:
// a peer that cannot be reached now is not told.
class PeerStream {
 public:
  enum class Purpose { kData, kReport };

  // Opens the stream to `peer` at `address`, carrying `member_tag` and
  // `park_header` ("" for none) as metadata, and starts its sender thread.
  PeerStream(int peer, const std::string& address, const TransportServerOptions& options, Env* env,
             const std::string& member_tag, const std::string& park_header, Purpose purpose,
             std::function<void(const std::string&)> on_broken);

  ~PeerStream() { Close(); }

  // Queues a frame. A frame with a tracker is released through it if it is
  // dropped instead of sent.
  absl::Status Enqueue(OutFrame frame);

  // Cancels the stream: queued frames are dropped, writes in flight fail.
  void Cancel() { ctx_.TryCancel(); }

  // The world is broken and what is queued will never be used: queued data
  // is dropped and `report` goes out next, after the frame being written.
  // A stream with data waiting on a connection the peer never accepted (a
  // dead peer) is cancelled instead: the report would only wait behind it.
  void Abandon(OutFrame report);

  // Flushes what is queued and ends the stream, within the drain timeout.
  void Close();

  // Close in two halves, so that many streams close in parallel: no more
  // frames are accepted, and the sender thread ends the stream once the
  // queue is empty; what is still queued or unanswered after `budget` is
  // cancelled...
  void BeginClose(absl::Duration budget);
  // ...and this waits for that (cancelling what is still queued at the
  // deadline) and for the stream's end.
  void FinishClose();

 private:
  void Run();

  bool closed();

  void DropQueued();

  const int peer_;
  const std::string address_;
  const absl::Duration drain_timeout_;
  Env* const env_;
  const std::function<void(const std::string&)> on_broken_;
  std::shared_ptr<grpc::Channel> channel_;
  grpc::ClientContext ctx_;
  transport::PushSummary summary_;
  std::unique_ptr<grpc::ClientWriter<OutFrame>> writer_;
  std::thread thread_;

  Mutex mu_;
  std::deque<OutFrame> queue_ ABSL_GUARDED_BY(mu_);  // front is being written
  absl::Status broken_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool wrote_ ABSL_GUARDED_BY(mu_) = false;  // a write succeeded: the peer accepted the connection
  absl::Time close_deadline_ ABSL_GUARDED_BY(mu_);
  bool joined_ ABSL_GUARDED_BY(mu_) = false;
};


}  // namespace shardline

#endif  // SHARDLINE_WORKER_COLLECTIVE_GRPC_PEER_STREAM_H_
