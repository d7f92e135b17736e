#include "worker/collective/grpc_transport.h"

#include <algorithm>
#include <deque>
#include <functional>
#include <map>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/net/grpc_util.h"
#include "common/platform/logging.h"
#include "common/platform/mutex.h"
#include "grpcpp/impl/codegen/method_handler.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "grpcpp/impl/codegen/rpc_method.h"
#include "grpcpp/impl/codegen/rpc_service_method.h"
#include "grpcpp/impl/codegen/server_callback_handlers.h"
#include "proto/transport.pb.h"
#include "worker/collective/grpc_frame.h"
#include "worker/collective/mailbox.h"
#include "common/platform/clock.h"

namespace shardline {
namespace {

// The one RPC of proto/transport.proto. Its stub and handler are written
// against OutFrame/InFrame (grpc_frame.h) instead of the generated Frame, so
// payloads are not copied; the bytes on the wire are still a Frame.
constexpr char kPushMethod[] = "/shardline.transport.Transport/Push";

// A frame with this tag carries a reason the world is broken, not data.
constexpr uint64_t kPoisonTag = ~uint64_t{0};
// Once this process has joined a generation, a stream may name one at most
// this far ahead (a peer can be one generation ahead while this rank is
// still leaving the last); further ahead is refused at once.
constexpr uint64_t kMaxGenerationsAhead = 2;
// Streams waiting for this process to reach their generation, each holding
// its first frame (at most one segment) and no thread; more are refused, as
// is a second one from the same sender for the same generation beyond
// kMaxParkedPerSender.
constexpr size_t kMaxParkedStreams = 64;
constexpr int kMaxParkedPerSender = 2;
// Metadata of a stream's park tag: "<receiver rank>.<ParkTag>".
constexpr char kParkTagMetadataKey[] = "shardline-park";

// Data-plane settings shared by both ends of a Push stream, as
// (name, value) pairs. The reasons:
//  - max_frame_size: HTTP/2 DATA frames of up to 16 MiB instead of 16 KiB,
//    so a 1 MiB segment is one frame, not 64 (fewer headers and wakeups).
//  - lookahead/write buffer: flow-control windows large enough that a
//    sender never stalls on a segment or two in flight (Gloo keeps two).
//  - read chunks of up to 4 MiB: fewer read syscalls per segment.
std::vector<std::pair<std::string, int>> DataPlaneArgs() {
  return {{GRPC_ARG_HTTP2_MAX_FRAME_SIZE, (1 << 24) - 1},
          {GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 64 << 20},
          {GRPC_ARG_HTTP2_WRITE_BUFFER_SIZE, 8 << 20},
          {GRPC_ARG_TCP_READ_CHUNK_SIZE, 4 << 20},
          {GRPC_ARG_TCP_MIN_READ_CHUNK_SIZE, 256 << 10},
          {GRPC_ARG_TCP_MAX_READ_CHUNK_SIZE, 4 << 20}};
}

// Keepalive settings (TransportServerOptions), shared by both ends.
std::vector<std::pair<std::string, int>> KeepaliveArgs(const TransportServerOptions& o) {
  return {{GRPC_ARG_KEEPALIVE_TIME_MS, static_cast<int>(absl::ToInt64Milliseconds(o.keepalive_time))},
          {GRPC_ARG_KEEPALIVE_TIMEOUT_MS, static_cast<int>(absl::ToInt64Milliseconds(o.keepalive_timeout))},
          {GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1},
          {GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0}};
}

// One long-lived Push stream to a peer, fed by its own thread. On a write
// failure it calls on_broken(why) once, outside its lock.
//
// A data stream waits for the peer to accept it (wait_for_ready): the peer
// may still be starting. A stream opened only to report a failure does not:
// a peer that cannot be reached now is not told.
class PeerStream {
 public:
  enum class Purpose { kData, kReport };

  PeerStream(int peer, const std::string& address, const TransportServerOptions& options,
             const std::string& member_tag, const std::string& park_header, Purpose purpose,
             std::function<void(const std::string&)> on_broken)
      : peer_(peer), address_(address), drain_timeout_(options.drain_timeout), on_broken_(std::move(on_broken)) {
    grpc::ChannelArguments args = DefaultChannelArguments();
    for (const auto& [name, value] : KeepaliveArgs(options)) args.SetInt(name, value);
    for (const auto& [name, value] : DataPlaneArgs()) args.SetInt(name, value);
    // A connection of our own, not shared with other generations' channels.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    channel_ = grpc::CreateCustomChannel(
        address, options.auth != nullptr ? options.auth->ChannelCredentials() : grpc::InsecureChannelCredentials(),
        args);
    // No job secret travels on the data plane: the member tag is good only
    // for this receiver in this generation, the park tag only for waiting.
    if (!member_tag.empty()) ctx_.AddMetadata(kMemberTagMetadataKey, member_tag);
    if (!park_header.empty()) ctx_.AddMetadata(kParkTagMetadataKey, park_header);
    ctx_.set_wait_for_ready(purpose == Purpose::kData);
    // Send the call's headers with the first frame, on the sender thread:
    // otherwise creating the stream blocks (forever, with wait_for_ready)
    // until a peer that may be dead accepts the call.
    ctx_.set_initial_metadata_corked(true);
    const grpc::internal::RpcMethod method(kPushMethod, grpc::internal::RpcMethod::CLIENT_STREAMING, channel_);
    writer_.reset(grpc::internal::ClientWriterFactory<OutFrame>::Create(channel_.get(), method, &ctx_, &summary_));
    thread_ = std::thread([this] { Run(); });
  }

  ~PeerStream() { Close(); }

  // Queues a frame. A frame with a tracker is released through it if it is
  // dropped instead of sent.
  absl::Status Enqueue(OutFrame frame) {
    MutexLock lock(&mu_);
    if (!broken_.ok()) {
      if (frame.tracker != nullptr) frame.tracker->Release();
      return broken_;
    }
    queue_.push_back(std::move(frame));
    return absl::OkStatus();
  }

  // Cancels the stream: queued frames are dropped, writes in flight fail.
  void Cancel() { ctx_.TryCancel(); }

  // The world is broken and what is queued will never be used: queued data
  // is dropped and `report` goes out next, after the frame being written.
  // A stream with data waiting on a connection the peer never accepted (a
  // dead peer) is cancelled instead: the report would only wait behind it.
  void Abandon(OutFrame report) {
    std::vector<OutFrame> dropped;
    {
      MutexLock lock(&mu_);
      if (!broken_.ok()) return;
      if (!wrote_ && !queue_.empty()) {
        ctx_.TryCancel();
        return;
      }
      // The front frame may be in the sender thread's hands.
      while (queue_.size() > 1) {
        dropped.push_back(std::move(queue_.back()));
        queue_.pop_back();
      }
      queue_.push_back(std::move(report));
    }
    for (OutFrame& f : dropped) {
      if (f.tracker != nullptr) f.tracker->Release();
    }
  }

  // Flushes what is queued and ends the stream, within the drain timeout.
  void Close() {
    BeginClose(drain_timeout_);
    FinishClose();
  }

  // Close in two halves, so that many streams close in parallel: no more
  // frames are accepted, and the sender thread ends the stream once the
  // queue is empty; what is still queued or unanswered after `budget` is
  // cancelled...
  void BeginClose(absl::Duration budget) {
    MutexLock lock(&mu_);
    if (closed_) return;
    closed_ = true;
    close_deadline_ = WallNow() + budget;
  }
  // ...and this waits for that (cancelling what is still queued at the
  // deadline) and for the stream's end.
  void FinishClose() {
    {
      MutexLock lock(&mu_);
      if (joined_) return;
      joined_ = true;
      auto drained = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return queue_.empty() || !broken_.ok(); };
      mu_.AwaitWithDeadline(absl::Condition(&drained), close_deadline_);
      if (!queue_.empty()) ctx_.TryCancel();
    }
    thread_.join();
    DropQueued();
  }

 private:
  void Run() {
    for (;;) {
      const OutFrame* frame;
      {
        MutexLock lock(&mu_);
        auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !queue_.empty() || closed_; };
        mu_.Await(absl::Condition(&ready));
        if (queue_.empty()) break;
        frame = &queue_.front();  // deque: stays put while others are added
      }
      const bool ok = writer_->Write(*frame);
      std::string why;
      {
        MutexLock lock(&mu_);
        if (frame->tracker != nullptr) frame->tracker->Release();  // serialised: copied
        queue_.pop_front();
        wrote_ = wrote_ || ok;
        if (!ok) {
          why = absl::StrCat("the connection to it at ", address_, " broke");
          broken_ = absl::UnavailableError(absl::StrCat("peer rank ", peer_, " is gone: ", why));
        }
      }
      if (!ok) DropQueued();
      if (!ok) {
        if (!closed()) on_broken_(why);
        break;
      }
    }
    writer_->WritesDone();
    // The receiver ends the call once it has read the half-close; one that
    // does not (its stream parked for a generation it never reaches, or a
    // stuck process) is cancelled, so closing never waits forever.
    absl::Time finish_by;
    {
      MutexLock lock(&mu_);
      finish_by = closed_ ? close_deadline_ : WallNow() + drain_timeout_;
    }
    Notification finished;
    std::thread canceller([&] {
      if (!finished.WaitForNotificationWithTimeout(finish_by - WallNow())) ctx_.TryCancel();
    });
    writer_->Finish();
    finished.Notify();
    canceller.join();
  }

  bool closed() {
    MutexLock lock(&mu_);
    return closed_;
  }

  void DropQueued() {
    MutexLock lock(&mu_);
    for (OutFrame& f : queue_) {
      if (f.tracker != nullptr) f.tracker->Release();
    }
    queue_.clear();
  }

  const int peer_;
  const std::string address_;
  const absl::Duration drain_timeout_;
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

// Everything of one generation on this rank: its mailbox and its streams.
// Shared by the Transport the caller holds and by the server that delivers
// into it.
class Generation {
 public:
  Generation(uint64_t generation, int rank, std::vector<std::string> peers, ConnectOptions connect,
             const TransportServerOptions& options)
      : generation_(generation), rank_(rank), peers_(std::move(peers)), keys_(std::move(connect.keys)),
        options_(options), box_(static_cast<int>(peers_.size()), connect.max_unclaimed_bytes_per_peer,
             connect.max_unclaimed_frames_per_peer),
        streams_(peers_.size()) {}

  // True if `peer` is this rank or one of its data-plane peers: the ranks
  // it has an address (and a tag) for.
  bool Knows(int peer) const { return peer == rank_ || !peers_[static_cast<size_t>(peer)].empty(); }

  // Why `peer` cannot be talked to this generation, or OK.
  absl::Status CheckPeer(int peer) const {
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

  // True if a stream with `metadata` may speak for rank `src`, a known peer.
  bool AcceptsSender(int src, const std::multimap<grpc::string_ref, grpc::string_ref>& metadata) const {
    if (keys_.peer_tags.empty()) return true;
    const auto it = metadata.find(kMemberTagMetadataKey);
    return it != metadata.end() &&
           SecretEquals(absl::string_view(it->second.data(), it->second.size()),
                        keys_.peer_tags[static_cast<size_t>(src)]);
  }

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
  Mailbox& box() { return box_; }

  // The stream to `peer`, created on first use; null after Shutdown.
  PeerStream* Stream(int peer) {
    MutexLock lock(&mu_);
    return StreamLocked(peer);
  }

  SendTracker& tracker() { return tracker_; }

  // Waits for every referenced payload to be released; past the deadline,
  // cancels all streams (releasing everything) and fails the world.
  absl::Status Flush(absl::Time deadline) {
    if (tracker_.WaitIdle(deadline)) return absl::OkStatus();
    const std::string why = absl::StrCat("rank ", rank_, " could not hand its data to its peers before the deadline");
    Fail(why);
    CancelAll();
    while (!tracker_.WaitIdle(WallNow() + absl::Seconds(5))) {
      SLOG(WARNING) << "frames still queued after cancelling the streams; waiting";
    }
    return absl::DeadlineExceededError(why);
  }

  void Shutdown() {
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

 private:
  void Spread(const std::string& why, bool found_here) {
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

  // The stream to `peer`, opened for `purpose` if there is none yet; null
  // after Shutdown.
  PeerStream* StreamLocked(int peer, PeerStream::Purpose purpose = PeerStream::Purpose::kData)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (shutdown_) return nullptr;
    auto& s = streams_[static_cast<size_t>(peer)];
    if (s == nullptr) {
      const std::string tag = keys_.secret.empty() ? "" : MemberTag(keys_.secret, generation_, peer);
      const std::string park =
          keys_.park_tags.empty() ? "" : absl::StrCat(peer, ".", keys_.park_tags[static_cast<size_t>(peer)]);
      s = std::make_unique<PeerStream>(peer, peers_[static_cast<size_t>(peer)], options_, tag, park, purpose,
                                       [this, peer](const std::string& why) {
        box_.MarkGone(peer, why);
        Fail(absl::StrCat("peer rank ", peer, " is gone: ", why, " (reported by rank ", rank_, ")"));
      });
    }
    return s.get();
  }

  void CancelAll() {
    MutexLock lock(&mu_);
    for (auto& s : streams_) {
      if (s != nullptr) s->Cancel();
    }
  }

  const uint64_t generation_;
  const int rank_;
  const std::vector<std::string> peers_;
  const MemberKeys keys_;
  const TransportServerOptions options_;
  Mailbox box_;
  SendTracker tracker_;
  Mutex mu_;
  std::vector<std::unique_ptr<PeerStream>> streams_ ABSL_GUARDED_BY(mu_);
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
};

class GrpcTransport : public Transport {
 public:
  explicit GrpcTransport(std::shared_ptr<Generation> gen) : gen_(std::move(gen)) {}
  ~GrpcTransport() override { Shutdown(); }

  int rank() const override { return gen_->rank(); }
  int world_size() const override { return gen_->world_size(); }

  absl::Status Send(int peer, uint64_t tag, absl::Span<const char> data, absl::Time) override {
    if (absl::Status bad = CheckPeer(peer); !bad.ok()) return bad;
    if (peer == rank()) {
      return gen_->box().Put(peer, tag, std::make_unique<StringPayload>(std::string(data.data(), data.size())));
    }
    OutFrame frame;
    frame.src_rank = rank();
    frame.generation = gen_->generation();
    frame.tag = tag;
    frame.payload = data;
    frame.tracker = &gen_->tracker();
    PeerStream* stream = gen_->Stream(peer);
    if (stream == nullptr) return absl::AbortedError("transport shut down");
    gen_->tracker().Add();
    return stream->Enqueue(std::move(frame));
  }

  absl::StatusOr<std::unique_ptr<Payload>> Receive(int peer, uint64_t tag, absl::Time deadline) override {
    if (absl::Status bad = CheckPeer(peer); !bad.ok()) return bad;
    absl::StatusOr<std::unique_ptr<Payload>> p = gen_->box().Take(peer, tag, deadline);
    Report(p.status());
    return p;
  }

  absl::Status ExpectReceive(int peer, uint64_t tag, ReceiveHandler handler) override {
    if (absl::Status bad = CheckPeer(peer); !bad.ok()) return bad;
    gen_->box().Expect(peer, tag, std::move(handler));
    return absl::OkStatus();
  }

  absl::Status AwaitReceive(int peer, uint64_t tag, absl::Time deadline) override {
    if (absl::Status bad = CheckPeer(peer); !bad.ok()) return bad;
    absl::Status s = gen_->box().Await(peer, tag, deadline);
    Report(s);
    return s;
  }

  void CancelReceives() override { gen_->box().CancelExpected(); }

  absl::Status Flush(absl::Time deadline) override { return gen_->Flush(deadline); }

  void Shutdown() override { gen_->Shutdown(); }

 private:
  // A receive that failed for want of a peer breaks the world: tell every rank.
  void Report(const absl::Status& s) {
    if (absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s)) {
      gen_->Fail(absl::StrCat(s.message(), " (reported by rank ", rank(), ")"));
    }
  }

  absl::Status CheckPeer(int peer) const { return gen_->CheckPeer(peer); }

  std::shared_ptr<Generation> gen_;
};

}  // namespace

// A stream whose first frame names a generation this process has not reached
// yet. It waits without a thread; the server resumes it when the generation
// is installed, or with null when it never will be (or it waited too long).
class ParkedStream {
 public:
  virtual ~ParkedStream() = default;
  virtual void Resume(std::shared_ptr<Generation> gen) = 0;
};

class TransportServer::Impl : public grpc::Service {
 public:
  Impl();
  ~Impl() override { StopReaper(); }

  TransportServerOptions options;  // set once, before the server starts

  enum class Admission { kNow, kParked, kRefused };

  // Where a stream from `src` whose first frame names `generation` goes:
  // kNow with *gen set if it is the current one; kParked if `may_park`, it
  // is at most kMaxGenerationsAhead ahead, fewer than kMaxParkedStreams wait
  // and fewer than kMaxParkedPerSender from `src` for that generation (the
  // server later calls stream->Resume, exactly once, unless Unpark takes it
  // back first; after options.generation_wait the reaper resumes it with
  // null); kRefused otherwise (older, too far ahead, too many).
  Admission Admit(uint64_t generation, int src, bool may_park, ParkedStream* stream,
                  std::shared_ptr<Generation>* gen) {
    MutexLock lock(&mu_);
    const uint64_t current = current_ == nullptr ? 0 : current_->generation();
    if (current_ != nullptr && generation == current) {
      *gen = current_;
      return Admission::kNow;
    }
    int from_src = 0;
    for (const auto& [parked, p] : parked_) from_src += p.generation == generation && p.src == src;
    if (may_park && generation > current && (current_ == nullptr || generation - current <= kMaxGenerationsAhead) &&
        parked_.size() < kMaxParkedStreams && from_src < kMaxParkedPerSender) {
      // A process that has joined no generation yet (just started, still
      // loading) cannot tell how far ahead its first one is.
      parked_[stream] = Parked{generation, src, absl::ToUnixMicros(WallNow())};
      return Admission::kParked;
    }
    return Admission::kRefused;
  }

  // Whether a stream may wait for a generation this process has not joined:
  // it must carry the park tag the coordinator gave its sender for this
  // receiver, checked with this process's credential. Without a credential
  // (a job without a token) every stream may.
  bool MayPark(const std::multimap<grpc::string_ref, grpc::string_ref>& metadata, uint64_t generation, int src) const {
    if (options.auth == nullptr || !options.auth->enabled()) return true;
    const auto it = metadata.find(kParkTagMetadataKey);
    if (it == metadata.end()) return false;
    const absl::string_view value(it->second.data(), it->second.size());
    const size_t dot = value.find('.');
    int receiver = -1;
    if (dot == absl::string_view::npos || !absl::SimpleAtoi(value.substr(0, dot), &receiver) || receiver < 0 ||
        receiver > kMaxCredentialRank) {
      return false;
    }
    const Credential& mine = options.auth->credential();
    if (mine.rank >= 0 && mine.rank != receiver) return false;
    const std::string key = mine.rank >= 0 ? mine.key : KeyFor(mine.key, receiver);
    return SecretEquals(value.substr(dot + 1), ParkTag(key, generation, src));
  }

  // Takes a parked stream back (it was cancelled). False if it is not parked
  // (any more): then Resume has been or is being called.
  bool Unpark(ParkedStream* stream) {
    MutexLock lock(&mu_);
    return parked_.erase(stream) > 0;
  }

  // Resumes, with null, every stream parked longer than
  // options.generation_wait, checking every 100 ms until StopReaper: a stream never waits on another's
  // arrival to be let go.
  void StartReaper() {
    reaper_ = std::thread([this] {
      for (;;) {
        std::vector<ParkedStream*> expired;
        {
          MutexLock lock(&mu_);
          auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return reaper_stop_; };
          mu_.AwaitWithTimeout(absl::Condition(&stopping), absl::Milliseconds(100));
          if (reaper_stop_) return;
          const int64_t now = absl::ToUnixMicros(WallNow());
          for (auto it = parked_.begin(); it != parked_.end();) {
            if (now - it->second.since_micros > absl::ToInt64Microseconds(options.generation_wait)) {
              expired.push_back(it->first);
              it = parked_.erase(it);
            } else {
              ++it;
            }
          }
        }
        for (ParkedStream* s : expired) s->Resume(nullptr);
      }
    });
  }
  void StopReaper() {
    {
      MutexLock lock(&mu_);
      reaper_stop_ = true;
    }
    if (reaper_.joinable()) reaper_.join();
  }

  absl::Status Install(std::shared_ptr<Generation> gen) {
    std::shared_ptr<Generation> old;
    std::vector<std::pair<ParkedStream*, std::shared_ptr<Generation>>> resume;
    {
      MutexLock lock(&mu_);
      if (current_ != nullptr && gen->generation() <= current_->generation()) {
        return absl::FailedPreconditionError(absl::StrCat("generation ", gen->generation(),
                                                          " is not newer than the current generation ",
                                                          current_->generation()));
      }
      old = std::move(current_);
      current_ = gen;
      for (auto it = parked_.begin(); it != parked_.end();) {
        if (it->second.generation <= gen->generation()) {
          resume.emplace_back(it->first, it->second.generation == gen->generation() ? gen : nullptr);
          it = parked_.erase(it);
        } else {
          ++it;
        }
      }
    }
    if (old != nullptr) old->Shutdown();
    for (auto& [stream, g] : resume) stream->Resume(std::move(g));
    return absl::OkStatus();
  }

  uint64_t generation() {
    MutexLock lock(&mu_);
    return current_ == nullptr ? 0 : current_->generation();
  }

  size_t parked() {
    MutexLock lock(&mu_);
    return parked_.size();
  }

  GrpcServer grpc;

 private:
  struct Parked {
    uint64_t generation;
    int src;
    int64_t since_micros;
  };
  Mutex mu_;
  std::shared_ptr<Generation> current_ ABSL_GUARDED_BY(mu_);
  std::map<ParkedStream*, Parked> parked_ ABSL_GUARDED_BY(mu_);
  bool reaper_stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread reaper_;
};

namespace {

// The receiving end of one Push stream. Reads complete on gRPC's threads,
// and each frame is delivered right there: a posted receive's handler (the
// reduction or copy into place) runs on the thread that read the bytes.
class PushReactor : public grpc::ServerReadReactor<InFrame>, public ParkedStream {
 public:
  PushReactor(TransportServer::Impl* server, grpc::CallbackServerContext* ctx, transport::PushSummary* summary)
      : server_(server), ctx_(ctx), summary_(summary) {
    StartRead(&frame_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      End();
      return;
    }
    if (gen_ == nullptr) {
      // The first frame names the stream's generation. One this process has
      // not reached yet parks the stream, holding no thread, until it does;
      // except a stream that opens with a failure report: that generation is
      // over, and parking it would hold its sender's close until this
      // process (say, a restarted worker that will never join it) moves on.
      // Only a member of the generation may wait for it: a sender the
      // coordinator gave a park tag for this receiver.
      std::shared_ptr<Generation> gen;
      const bool member = server_->MayPark(ctx_->client_metadata(), frame_.generation, frame_.src_rank);
      switch (server_->Admit(frame_.generation, frame_.src_rank, /*may_park=*/member && frame_.tag != kPoisonTag,
                             this, &gen)) {
        case TransportServer::Impl::Admission::kRefused:
          if (!member) {
            if (RpcAuth* auth = server_->options.auth; auth != nullptr) {
              auth->Refused(RejectReason::kNotAMember, ctx_->peer());
            }
            Finish(grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                                absl::StrCat("a stream for generation ", frame_.generation,
                                             ", which this worker has not joined, without its sender's park tag")));
            return;
          }
          Resume(nullptr);  // refused the way an expired wait is
          return;
        case TransportServer::Impl::Admission::kParked:
          return;  // Resume() carries on
        case TransportServer::Impl::Admission::kNow:
          Resume(std::move(gen));
          return;
      }
    }
    Continue();
  }

  // The stream's generation is here (or, null, will never be).
  void Resume(std::shared_ptr<Generation> gen) override {
    if (gen == nullptr) {
      Finish(grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          absl::StrCat("frame of generation ", frame_.generation,
                                       " but this worker is at generation ", server_->generation())));
      return;
    }
    const grpc::Status joined = Join(std::move(gen));
    if (!joined.ok()) {
      Finish(joined);
      return;
    }
    Continue();
  }

  // A parked stream has no read pending that would see the cancellation.
  void OnCancel() override {
    if (server_->Unpark(this)) Finish(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled while parked"));
  }

  void OnDone() override { delete this; }

 private:
  void Continue() {
    const grpc::Status delivered = Deliver();
    if (!delivered.ok()) {
      Finish(delivered);
      return;
    }
    StartRead(&frame_);
  }

  // Binds the stream to its generation and sender, checking the sender.
  // Until it succeeds, gen_ stays null: a refused stream never touches the
  // generation's state (End() marks no one gone).
  grpc::Status Join(std::shared_ptr<Generation> gen) {
    const int src = frame_.src_rank;
    if (src < 0 || src >= gen->world_size()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          absl::StrCat("sender rank ", src, " is not in a world of ", gen->world_size()));
    }
    if (!gen->Knows(src)) {
      if (RpcAuth* auth = server_->options.auth; auth != nullptr) {
        auth->Refused(RejectReason::kNotAMember, ctx_->peer());
      }
      return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                          absl::StrCat("rank ", src, " is not among rank ", gen->rank(), "'s data-plane peers in generation ",
                                       gen->generation()));
    }
    if (!gen->AcceptsSender(src, ctx_->client_metadata())) {
      if (RpcAuth* auth = server_->options.auth; auth != nullptr) {
        auth->Refused(RejectReason::kNotAMember, ctx_->peer());
      }
      return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                          absl::StrCat("a stream speaking for rank ", src, " of generation ", gen->generation(),
                                       " without that member's tag"));
    }
    gen_ = std::move(gen);
    src_ = src;
    return grpc::Status::OK;
  }

  grpc::Status Deliver() {
    if (frame_.src_rank != src_) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          absl::StrCat("stream from rank ", src_, " carried a frame from rank ", frame_.src_rank));
    }
    if (frame_.tag == kPoisonTag) {
      std::string why(frame_.payload->size(), '\0');
      CopyPayloadInto(*frame_.payload, absl::MakeSpan(why)).IgnoreError();
      gen_->Relay(why);
      return grpc::Status::OK;
    }
    const absl::Status put = gen_->box().Put(src_, frame_.tag, std::move(frame_.payload));
    if (!put.ok()) {
      // A faulty peer: the world cannot go on with it. End() must not mark
      // it gone a second time.
      gen_->Fail(absl::StrCat(put.message(), " (reported by rank ", gen_->rank(), ")"));
      gen_ = nullptr;
      return ToGrpcStatus(put);
    }
    summary_->set_frames(summary_->frames() + 1);
    return grpc::Status::OK;
  }

  // The stream ended: the sender closed it, or it broke.
  void End() {
    if (gen_ != nullptr) {
      if (ctx_->IsCancelled()) {
        // The sender died or its connection broke mid-generation.
        const std::string why = "its connection broke";
        gen_->box().MarkGone(src_, why);
        gen_->Fail(absl::StrCat("peer rank ", src_, " is gone: ", why, " (reported by rank ", gen_->rank(), ")"));
      } else {
        gen_->box().MarkGone(src_, "it closed its stream");
      }
    }
    Finish(grpc::Status::OK);
  }

  TransportServer::Impl* const server_;
  grpc::CallbackServerContext* const ctx_;
  transport::PushSummary* const summary_;
  InFrame frame_;
  std::shared_ptr<Generation> gen_;
  int src_ = -1;
};

}  // namespace

TransportServer::Impl::Impl() {
  AddMethod(new grpc::internal::RpcServiceMethod(kPushMethod, grpc::internal::RpcMethod::CLIENT_STREAMING, nullptr));
  MarkMethodCallback(0, new grpc::internal::CallbackClientStreamingHandler<InFrame, transport::PushSummary>(
                            [this](grpc::CallbackServerContext* ctx, transport::PushSummary* summary) {
                              return new PushReactor(this, ctx, summary);
                            }));
}

TransportServer::TransportServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

TransportServer::~TransportServer() {
  impl_->StopReaper();
  if (impl_->grpc.server != nullptr) {
    impl_->grpc.server->Shutdown(DeadlineIn(absl::Seconds(1)));
  }
}

absl::StatusOr<std::unique_ptr<TransportServer>> TransportServer::Start(const std::string& listen,
                                                                        const TransportServerOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  GrpcServerOptions server_options;
  std::vector<std::pair<std::string, int>>& args = server_options.int_args;
  args = DataPlaneArgs();
  const std::vector<std::pair<std::string, int>> keepalive = KeepaliveArgs(options);
  args.insert(args.end(), keepalive.begin(), keepalive.end());
  args.insert(args.end(), {
      // Accept the peers' keepalive pings instead of closing the connection
      // for "too many pings".
      {GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
       static_cast<int>(absl::ToInt64Milliseconds(options.keepalive_time) / 2)},
      {GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0}});
  server_options.max_receive_bytes = options.max_frame_bytes;
  if (options.auth != nullptr) server_options.credentials = options.auth->ServerCredentials();
  absl::StatusOr<GrpcServer> server = StartGrpcServer(listen, {impl.get()}, server_options);
  if (!server.ok()) return server.status();
  impl->grpc = std::move(*server);
  impl->StartReaper();
  return std::unique_ptr<TransportServer>(new TransportServer(std::move(impl)));
}

int TransportServer::port() const { return impl_->grpc.port; }

size_t TransportServer::parked_streams() const { return impl_->parked(); }

absl::StatusOr<std::unique_ptr<Transport>> TransportServer::Connect(uint64_t generation, int rank,
                                                                    std::vector<std::string> peers,
                                                                    ConnectOptions options) {
  if (rank < 0 || rank >= static_cast<int>(peers.size())) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " is not in a world of ", peers.size()));
  }
  if (!options.keys.peer_tags.empty() && options.keys.peer_tags.size() != peers.size()) {
    return absl::InvalidArgumentError(absl::StrCat(options.keys.peer_tags.size(), " member tags for a world of ",
                                                   peers.size()));
  }
  if (!options.keys.park_tags.empty() && options.keys.park_tags.size() != peers.size()) {
    return absl::InvalidArgumentError(absl::StrCat(options.keys.park_tags.size(), " park tags for a world of ",
                                                   peers.size()));
  }
  auto gen = std::make_shared<Generation>(generation, rank, std::move(peers), std::move(options), impl_->options);
  absl::Status installed = impl_->Install(gen);
  if (!installed.ok()) return installed;
  return std::unique_ptr<Transport>(new GrpcTransport(std::move(gen)));
}

}  // namespace shardline
