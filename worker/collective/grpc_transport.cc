#include "worker/collective/grpc_transport.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/platform/clock.h"
#include "worker/collective/grpc_generation.h"
#include "worker/collective/grpc_push_server.h"
#include "worker/collective/grpc_wire.h"
#include "worker/collective/payload.h"

namespace shardline {
namespace {

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

TransportServer::TransportServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

TransportServer::~TransportServer() {
  impl_->StopReaper();
  if (impl_->grpc.server != nullptr) {
    impl_->grpc.Shutdown(DeadlineIn(absl::Seconds(1), impl_->env));
  }
}

absl::StatusOr<std::unique_ptr<TransportServer>> TransportServer::Start(Env* env, const std::string& listen,
                                                                        const TransportServerOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->env = env;
  GrpcServerOptions server_options;
  std::vector<std::pair<std::string, int>>& args = server_options.int_args;
  args = grpc_wire::DataPlaneArgs();
  const std::vector<std::pair<std::string, int>> keepalive = grpc_wire::KeepaliveArgs(options);
  args.insert(args.end(), keepalive.begin(), keepalive.end());
  args.insert(args.end(), {
      // Accept the peers' keepalive pings instead of closing the connection
      // for "too many pings".
      {GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
       static_cast<int>(absl::ToInt64Milliseconds(options.keepalive_time) / 2)},
      {GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0}});
  server_options.max_receive_bytes = options.max_frame_bytes;
  server_options.env = impl->env;
  server_options.gate.on_refused = options.on_connection_refused;
  // Plain TCP goes through the connection gate (grpc_util.h); TLS cannot.
  if (options.auth != nullptr && options.auth->tls()) server_options.credentials = options.auth->ServerCredentials();
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
  auto gen = std::make_shared<Generation>(generation, rank, std::move(peers), std::move(options), impl_->options,
                                          impl_->env);
  absl::Status installed = impl_->Install(gen);
  if (!installed.ok()) return installed;
  return std::unique_ptr<Transport>(new GrpcTransport(std::move(gen)));
}

}  // namespace shardline
