#include "worker/collective/grpc_peer_stream.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "common/net/grpc_util.h"
#include "common/platform/clock.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "grpcpp/impl/codegen/rpc_method.h"
#include "worker/collective/grpc_wire.h"

namespace shardline {

using grpc_wire::DataPlaneArgs;
using grpc_wire::KeepaliveArgs;
using grpc_wire::kParkTagMetadataKey;
using grpc_wire::kPushMethod;

PeerStream::PeerStream(int peer, const std::string& address, const TransportServerOptions& options, Env* env,
                       const std::string& member_tag, const std::string& park_header, Purpose purpose,
                       std::function<void(const std::string&)> on_broken)
    : peer_(peer), address_(address), drain_timeout_(options.drain_timeout), env_(env),
      on_broken_(std::move(on_broken)) {
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

absl::Status PeerStream::Enqueue(OutFrame frame) {
  MutexLock lock(&mu_);
  if (!broken_.ok()) {
    if (frame.tracker != nullptr) frame.tracker->Release();
    return broken_;
  }
  queue_.push_back(std::move(frame));
  return absl::OkStatus();
}

void PeerStream::Abandon(OutFrame report) {
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

void PeerStream::Close() {
  BeginClose(drain_timeout_);
  FinishClose();
}

void PeerStream::BeginClose(absl::Duration budget) {
  MutexLock lock(&mu_);
  if (closed_) return;
  closed_ = true;
  close_deadline_ = WallNow(env_) + budget;
}

void PeerStream::FinishClose() {
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

void PeerStream::Run() {
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
        why = absl::StrCat("sending to it at ", address_,
                           " failed: it died, stopped answering (paused, hung or partitioned) or the connection broke");
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
    finish_by = closed_ ? close_deadline_ : WallNow(env_) + drain_timeout_;
  }
  Notification finished;
  std::thread canceller([&] {
    if (!finished.WaitForNotificationWithTimeout(finish_by - WallNow(env_))) ctx_.TryCancel();
  });
  writer_->Finish();
  finished.Notify();
  canceller.join();
}

bool PeerStream::closed() {
  MutexLock lock(&mu_);
  return closed_;
}

void PeerStream::DropQueued() {
  MutexLock lock(&mu_);
  for (OutFrame& f : queue_) {
    if (f.tracker != nullptr) f.tracker->Release();
  }
  queue_.clear();
}

}  // namespace shardline
