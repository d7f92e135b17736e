#include "worker/collective/grpc_transport.h"

#include <deque>
#include <functional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/grpc_util.h"
#include "common/logging.h"
#include "proto/transport.grpc.pb.h"
#include "worker/collective/mailbox.h"

namespace shardline {
namespace {

// A frame with this tag carries a reason the world is broken, not data.
constexpr uint64_t kPoisonTag = ~uint64_t{0};
// How long a frame of a generation this process has not reached yet may wait
// for it (peers can start a generation a little before us).
constexpr absl::Duration kGenerationWait = absl::Seconds(30);
// How long closing a stream may take to flush frames still queued.
constexpr absl::Duration kDrainTimeout = absl::Seconds(5);
// HTTP/2 keepalive: a peer whose process stops answering (SIGSTOP, a hung
// host, a partition) fails its connections within about time + timeout,
// even while no operation is waiting on it directly.
constexpr int kKeepaliveTimeMs = 1000;
constexpr int kKeepaliveTimeoutMs = 2000;

void SetKeepalive(grpc::ChannelArguments* args) {
  args->SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, kKeepaliveTimeMs);
  args->SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, kKeepaliveTimeoutMs);
  args->SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args->SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
}

// One long-lived Push stream to a peer, fed by its own thread. On a write
// failure it calls on_broken(why) once, outside its lock.
class PeerStream {
 public:
  PeerStream(int peer, const std::string& address, std::function<void(const std::string&)> on_broken)
      : peer_(peer), address_(address), on_broken_(std::move(on_broken)) {
    grpc::ChannelArguments args = DefaultChannelArguments();
    SetKeepalive(&args);
    // A connection of our own, not shared with other generations' channels.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    stub_ = transport::Transport::NewStub(
        grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
    ctx_.set_wait_for_ready(true);  // the peer may still be starting
    writer_ = stub_->Push(&ctx_, &summary_);
    thread_ = std::thread([this] { Run(); });
  }

  ~PeerStream() { Close(); }

  absl::Status Enqueue(transport::Frame frame) {
    absl::MutexLock lock(&mu_);
    if (!broken_.ok()) return broken_;
    queue_.push_back(std::move(frame));
    return absl::OkStatus();
  }

  // Flushes what is queued (bounded by kDrainTimeout), then ends the stream.
  void Close() {
    {
      absl::MutexLock lock(&mu_);
      if (closed_) return;
      closed_ = true;
      auto drained = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return queue_.empty() || !broken_.ok(); };
      mu_.AwaitWithTimeout(absl::Condition(&drained), kDrainTimeout);
      if (!queue_.empty()) ctx_.TryCancel();
    }
    thread_.join();
  }

 private:
  void Run() {
    for (;;) {
      transport::Frame frame;
      {
        absl::MutexLock lock(&mu_);
        auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !queue_.empty() || closed_; };
        mu_.Await(absl::Condition(&ready));
        if (queue_.empty()) break;
        frame = std::move(queue_.front());
      }
      const bool ok = writer_->Write(frame);
      std::string why;
      {
        absl::MutexLock lock(&mu_);
        queue_.pop_front();
        if (!ok) {
          why = absl::StrCat("the connection to it at ", address_, " broke");
          broken_ = absl::UnavailableError(absl::StrCat("peer rank ", peer_, " is gone: ", why));
          queue_.clear();
        }
      }
      if (!ok) {
        if (!closed()) on_broken_(why);
        break;
      }
    }
    writer_->WritesDone();
    writer_->Finish();
  }

  bool closed() {
    absl::MutexLock lock(&mu_);
    return closed_;
  }

  const int peer_;
  const std::string address_;
  const std::function<void(const std::string&)> on_broken_;
  std::unique_ptr<transport::Transport::Stub> stub_;
  grpc::ClientContext ctx_;
  transport::PushSummary summary_;
  std::unique_ptr<grpc::ClientWriter<transport::Frame>> writer_;
  std::thread thread_;

  absl::Mutex mu_;
  std::deque<transport::Frame> queue_ ABSL_GUARDED_BY(mu_);  // front is being written
  absl::Status broken_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

// Everything of one generation on this rank: its mailbox and its streams.
// Shared by the Transport the caller holds and by the server that delivers
// into it.
class Generation {
 public:
  Generation(uint64_t generation, int rank, std::vector<std::string> peers)
      : generation_(generation), rank_(rank), peers_(std::move(peers)),
        box_(static_cast<int>(peers_.size())), streams_(peers_.size()) {}

  uint64_t generation() const { return generation_; }
  int rank() const { return rank_; }
  int world_size() const { return static_cast<int>(peers_.size()); }
  Mailbox& box() { return box_; }

  // The stream to `peer`, created on first use; null after Shutdown.
  PeerStream* Stream(int peer) {
    absl::MutexLock lock(&mu_);
    return StreamLocked(peer);
  }

  // The world is broken: fail every local Recv with `why`, and tell every
  // other rank. Only the first failure is broadcast. Holding mu_ throughout
  // keeps Shutdown (which a failed caller runs next) from closing the
  // streams before the reports are queued on them.
  void Fail(const std::string& why) {
    absl::MutexLock lock(&mu_);
    if (!box_.Poison(why)) return;
    SLOG(WARNING) << "collective failed: " << why << "; telling every rank";
    for (int peer = 0; peer < world_size(); ++peer) {
      if (peer == rank_) continue;
      transport::Frame frame;
      frame.set_src_rank(rank_);
      frame.set_generation(generation_);
      frame.set_tag(kPoisonTag);
      frame.set_payload(why);
      if (PeerStream* s = StreamLocked(peer)) s->Enqueue(std::move(frame)).IgnoreError();
    }
  }

  void Shutdown() {
    std::vector<std::unique_ptr<PeerStream>> streams;
    {
      absl::MutexLock lock(&mu_);
      if (shutdown_) return;
      shutdown_ = true;
      streams.swap(streams_);
    }
    for (auto& s : streams) {
      if (s != nullptr) s->Close();
    }
    box_.Shutdown();
  }

 private:
  PeerStream* StreamLocked(int peer) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (shutdown_) return nullptr;
    auto& s = streams_[static_cast<size_t>(peer)];
    if (s == nullptr) {
      s = std::make_unique<PeerStream>(peer, peers_[static_cast<size_t>(peer)], [this, peer](const std::string& why) {
        box_.MarkGone(peer, why);
        Fail(absl::StrCat("peer rank ", peer, " is gone: ", why, " (reported by rank ", rank_, ")"));
      });
    }
    return s.get();
  }

  const uint64_t generation_;
  const int rank_;
  const std::vector<std::string> peers_;
  Mailbox box_;
  absl::Mutex mu_;
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
      gen_->box().Put(peer, tag, std::string(data.data(), data.size()));
      return absl::OkStatus();
    }
    transport::Frame frame;
    frame.set_src_rank(rank());
    frame.set_generation(gen_->generation());
    frame.set_tag(tag);
    frame.set_payload(data.data(), data.size());
    PeerStream* stream = gen_->Stream(peer);
    if (stream == nullptr) return absl::AbortedError("transport shut down");
    return stream->Enqueue(std::move(frame));
  }

  absl::Status Recv(int peer, uint64_t tag, absl::Span<char> data, absl::Time deadline) override {
    if (absl::Status bad = CheckPeer(peer); !bad.ok()) return bad;
    absl::Status s = gen_->box().Take(peer, tag, data, deadline);
    if (absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s)) {
      gen_->Fail(absl::StrCat(s.message(), " (reported by rank ", rank(), ")"));
    }
    return s;
  }

  void Shutdown() override { gen_->Shutdown(); }

 private:
  absl::Status CheckPeer(int peer) const {
    if (peer >= 0 && peer < world_size()) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat("no rank ", peer, " in a world of ", world_size()));
  }

  std::shared_ptr<Generation> gen_;
};

}  // namespace

class TransportServer::Impl : public transport::Transport::Service {
 public:
  grpc::Status Push(grpc::ServerContext* ctx, grpc::ServerReader<transport::Frame>* reader,
                    transport::PushSummary* summary) override {
    transport::Frame frame;
    std::shared_ptr<Generation> gen;
    int src = -1;
    while (reader->Read(&frame)) {
      if (gen == nullptr) {
        gen = WaitFor(frame.generation());
        if (gen == nullptr) {
          return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                              absl::StrCat("frame of generation ", frame.generation(),
                                           " but this worker is at generation ", generation()));
        }
        src = frame.src_rank();
        if (src < 0 || src >= gen->world_size()) {
          return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                              absl::StrCat("sender rank ", src, " is not in a world of ", gen->world_size()));
        }
      }
      if (frame.tag() == kPoisonTag) {
        gen->box().Poison(frame.payload());
        continue;
      }
      gen->box().Put(src, frame.tag(), std::move(*frame.mutable_payload()));
      summary->set_frames(summary->frames() + 1);
    }
    if (gen != nullptr) {
      if (ctx->IsCancelled()) {
        // The sender died or its connection broke mid-generation.
        const std::string why = "its connection broke";
        gen->box().MarkGone(src, why);
        gen->Fail(absl::StrCat("peer rank ", src, " is gone: ", why, " (reported by rank ", gen->rank(), ")"));
      } else {
        gen->box().MarkGone(src, "it closed its stream");
      }
    }
    return grpc::Status::OK;
  }

  // The generation `generation`, waiting a while if this process has not
  // reached it yet; null for an older generation or after the wait.
  std::shared_ptr<Generation> WaitFor(uint64_t generation) {
    absl::MutexLock lock(&mu_);
    auto reached = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return current_ != nullptr && current_->generation() >= generation;
    };
    mu_.AwaitWithTimeout(absl::Condition(&reached), kGenerationWait);
    return current_ != nullptr && current_->generation() == generation ? current_ : nullptr;
  }

  absl::Status Install(std::shared_ptr<Generation> gen) {
    std::shared_ptr<Generation> old;
    {
      absl::MutexLock lock(&mu_);
      if (current_ != nullptr && gen->generation() <= current_->generation()) {
        return absl::FailedPreconditionError(absl::StrCat("generation ", gen->generation(),
                                                          " is not newer than the current generation ",
                                                          current_->generation()));
      }
      old = std::move(current_);
      current_ = std::move(gen);
    }
    if (old != nullptr) old->Shutdown();
    return absl::OkStatus();
  }

  uint64_t generation() {
    absl::MutexLock lock(&mu_);
    return current_ == nullptr ? 0 : current_->generation();
  }

  GrpcServer grpc;

 private:
  absl::Mutex mu_;
  std::shared_ptr<Generation> current_ ABSL_GUARDED_BY(mu_);
};

TransportServer::TransportServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

TransportServer::~TransportServer() {
  if (impl_->grpc.server != nullptr) {
    impl_->grpc.server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  }
}

absl::StatusOr<std::unique_ptr<TransportServer>> TransportServer::Start(const std::string& listen) {
  auto impl = std::make_unique<Impl>();
  absl::StatusOr<GrpcServer> server = StartGrpcServer(
      listen, {impl.get()},
      {{GRPC_ARG_KEEPALIVE_TIME_MS, kKeepaliveTimeMs},
       {GRPC_ARG_KEEPALIVE_TIMEOUT_MS, kKeepaliveTimeoutMs},
       {GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1},
       {GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0},
       // Accept the peers' 1 s keepalive pings instead of closing the
       // connection for "too many pings".
       {GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, kKeepaliveTimeMs / 2},
       {GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0}});
  if (!server.ok()) return server.status();
  impl->grpc = std::move(*server);
  return std::unique_ptr<TransportServer>(new TransportServer(std::move(impl)));
}

int TransportServer::port() const { return impl_->grpc.port; }

absl::StatusOr<std::unique_ptr<Transport>> TransportServer::Connect(uint64_t generation, int rank,
                                                                    std::vector<std::string> peers) {
  if (rank < 0 || rank >= static_cast<int>(peers.size())) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " is not in a world of ", peers.size()));
  }
  auto gen = std::make_shared<Generation>(generation, rank, std::move(peers));
  absl::Status installed = impl_->Install(gen);
  if (!installed.ok()) return installed;
  return std::unique_ptr<Transport>(new GrpcTransport(std::move(gen)));
}

}  // namespace shardline
