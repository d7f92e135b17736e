#include "worker/collective/grpc_push_server.h"

#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/net/rpc_auth.h"
#include "common/platform/clock.h"
#include "grpcpp/impl/codegen/method_handler.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "grpcpp/impl/codegen/rpc_method.h"
#include "grpcpp/impl/codegen/rpc_service_method.h"
#include "grpcpp/impl/codegen/server_callback_handlers.h"
#include "proto/transport.pb.h"
#include "worker/collective/grpc_frame.h"
#include "worker/collective/grpc_wire.h"

namespace shardline {

using grpc_wire::kMaxGenerationsAhead;
using grpc_wire::kMaxParkedPerSender;
using grpc_wire::kMaxParkedStreams;
using grpc_wire::kParkTagMetadataKey;
using grpc_wire::kPoisonTag;
using grpc_wire::kPushMethod;

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
        // The sender died, stopped answering keepalive pings (paused,
        // hung, partitioned) or its connection broke mid-generation; gRPC
        // does not say which, so the words name all three.
        const std::string why = absl::StrCat(
            "its stream was cut: the process died, or did not answer for ",
            absl::FormatDuration(server_->options.keepalive_time + server_->options.keepalive_timeout),
            " (paused, hung or partitioned), or the connection broke");
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


TransportServer::Impl::Admission TransportServer::Impl::Admit(uint64_t generation, int src, bool may_park,
                                                              ParkedStream* stream,
                                                              std::shared_ptr<Generation>* gen) {
  MutexLock lock(&mu_);
  const uint64_t current = current_ == nullptr ? 0 : current_->generation();
  if (current_ != nullptr && generation == current) {
    *gen = current_;
    return Admission::kNow;
  }
  // Only ranks some world of the job can have may wait (before the first
  // generation nothing says how large the world is).
  if (src < 0 || (current_ != nullptr && src >= current_->max_world_size())) return Admission::kRefused;
  int from_src = 0;
  for (const auto& [parked, p] : parked_) from_src += p.generation == generation && p.src == src;
  if (may_park && generation > current && (current_ == nullptr || generation - current <= kMaxGenerationsAhead) &&
      parked_.size() < kMaxParkedStreams && from_src < kMaxParkedPerSender) {
    // A process that has joined no generation yet (just started, still
    // loading) cannot tell how far ahead its first one is.
    parked_[stream] = Parked{generation, src, env->NowMicros()};
    return Admission::kParked;
  }
  return Admission::kRefused;
}

bool TransportServer::Impl::MayPark(const std::multimap<grpc::string_ref, grpc::string_ref>& metadata, uint64_t generation, int src) const {
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

bool TransportServer::Impl::Unpark(ParkedStream* stream) {
  MutexLock lock(&mu_);
  return parked_.erase(stream) > 0;
}

void TransportServer::Impl::StartReaper() {
  reaper_ = std::thread([this] {
    for (;;) {
      std::vector<ParkedStream*> expired;
      {
        MutexLock lock(&mu_);
        auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return reaper_stop_; };
        mu_.AwaitWithTimeout(absl::Condition(&stopping), absl::Milliseconds(100));
        if (reaper_stop_) return;
        const int64_t now = env->NowMicros();
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

void TransportServer::Impl::StopReaper() {
  {
    MutexLock lock(&mu_);
    reaper_stop_ = true;
  }
  if (reaper_.joinable()) reaper_.join();
}

absl::Status TransportServer::Impl::Install(std::shared_ptr<Generation> gen) {
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

uint64_t TransportServer::Impl::generation() {
  MutexLock lock(&mu_);
  return current_ == nullptr ? 0 : current_->generation();
}

size_t TransportServer::Impl::parked() {
  MutexLock lock(&mu_);
  return parked_.size();
}

}  // namespace shardline
