#include "worker/coordinator_client.h"

#include "absl/strings/str_cat.h"
#include "common/grpc_util.h"
#include "common/logging.h"
#include "worker/train/train_step.h"

namespace shardline {

CoordinatorClient::CoordinatorClient(const std::string& address) : address_(address) {
  stub_ = coordinator::Coordinator::NewStub(
      grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), DefaultChannelArguments()));
}

absl::StatusOr<coordinator::RegisterResponse> CoordinatorClient::Register(
    const coordinator::RegisterRequest& request, absl::Duration give_up_after) {
  const absl::Time give_up = absl::Now() + give_up_after;
  absl::Duration backoff = absl::Milliseconds(100);
  for (;;) {
    grpc::ClientContext ctx;
    coordinator::RegisterResponse response;
    const absl::Status s = FromGrpcStatus(stub_->Register(&ctx, request, &response));
    if (s.ok()) return response;
    const bool retry = absl::IsUnavailable(s) || absl::IsAlreadyExists(s) || absl::IsAborted(s) ||
                       absl::IsResourceExhausted(s);
    if (!retry) return s;
    if (absl::Now() + backoff > give_up) {
      return absl::Status(s.code(), absl::StrCat("registering with the coordinator at ", address_, " failed for ",
                                                 absl::FormatDuration(give_up_after), ": ", s.message()));
    }
    if (absl::IsUnavailable(s)) {
      SLOG(INFO) << "coordinator at " << address_ << " unreachable; retrying in " << absl::FormatDuration(backoff);
    } else {
      SLOG(INFO) << "registration refused (" << s.message() << "); retrying in " << absl::FormatDuration(backoff);
    }
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, absl::Seconds(1));
  }
}

Heartbeat::Heartbeat(CoordinatorClient* client, int rank, uint64_t generation, int64_t stop_at,
                     std::function<void(const std::string&)> on_abandon, absl::Duration interval)
    : rank_(rank),
      generation_(generation),
      interval_(interval),
      on_abandon_(std::move(on_abandon)),
      stop_request_(stop_at) {
  stream_ = client->stub()->Heartbeat(&ctx_);
  SendReport(false, "", "");  // the coordinator learns of the stream from its first report
  reader_ = std::thread([this] { ReadLoop(); });
  sender_ = std::thread([this] { SendLoop(); });
}

Heartbeat::~Heartbeat() {
  {
    absl::MutexLock lock(&mu_);
    closing_ = true;
  }
  ctx_.TryCancel();
  if (sender_.joinable()) sender_.join();
  if (reader_.joinable()) reader_.join();
}

absl::Status Heartbeat::Write(const metrics::MetricRecord& record) {
  absl::MutexLock lock(&mu_);
  records_.push_back(record);
  return absl::OkStatus();
}

absl::Status Heartbeat::ShardSaved(int64_t step, int rank, int world, const WrittenShard& shard) {
  coordinator::SavedShard s;
  s.set_step(step);
  s.set_world_size(world);
  s.set_file(shard.path.substr(shard.path.rfind('/') + 1));
  s.set_size(shard.size);
  s.set_crc32c(shard.crc32c);
  s.set_best(shard.best);
  s.set_best_value(shard.best_value);
  absl::MutexLock lock(&mu_);
  saved_.push_back(std::move(s));
  return absl::OkStatus();
}

void Heartbeat::ReportStuck(const std::string& what) {
  absl::MutexLock lock(&mu_);
  stuck_ = what;
}

bool Heartbeat::SendReport(bool finished, const std::string& fatal, const std::string& watchdog, int64_t bad_step,
                           const std::string& bad_why) {
  coordinator::WorkerReport r;
  r.set_rank(rank_);
  r.set_generation(generation_);
  r.set_steps_done(steps_done_.load());
  r.set_total_steps(total_steps_.load());
  r.set_finished(finished);
  r.set_fatal_error(fatal);
  r.set_watchdog(watchdog);
  r.set_bad_checkpoint_step(bad_step);
  r.set_bad_checkpoint_reason(bad_why);
  {
    absl::MutexLock lock(&mu_);
    if (!stuck_.empty()) r.set_watchdog(stuck_);
    for (metrics::MetricRecord& m : records_) *r.add_metrics() = std::move(m);
    records_.clear();
    for (coordinator::SavedShard& s : saved_) *r.add_saved() = std::move(s);
    saved_.clear();
  }
  absl::MutexLock lock(&write_mu_);
  return stream_->Write(r);
}

void Heartbeat::SendLoop() {
  absl::MutexLock lock(&mu_);
  for (;;) {
    auto closing = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return closing_; };
    if (mu_.AwaitWithTimeout(absl::Condition(&closing), interval_)) return;
    mu_.Unlock();
    const bool ok = SendReport(false, "", "");
    mu_.Lock();
    if (!ok && !closing_) {
      mu_.Unlock();
      Abandon(absl::StrCat("the heartbeat stream to the coordinator broke"));
      mu_.Lock();
      return;
    }
  }
}

void Heartbeat::ReadLoop() {
  coordinator::CoordinatorCommand c;
  while (stream_->Read(&c)) {
    if (c.stop_at() > 0) stop_request_.store(c.stop_at());
    if (c.checkpoint_at() > 0) checkpoint_request_.store(c.checkpoint_at());
    if (c.eval_at() > 0) eval_request_.store(c.eval_at());
    if (c.new_generation() > 0) {
      Abandon(absl::StrCat("the coordinator moved the world to generation ", c.new_generation()));
    }
  }
  bool closing;
  {
    absl::MutexLock lock(&mu_);
    closing = closing_;
  }
  if (!closing) Abandon("the coordinator ended the heartbeat stream");
}

void Heartbeat::Abandon(const std::string& why) {
  {
    absl::MutexLock lock(&mu_);
    if (!abandoned_.empty()) return;
    abandoned_ = why;
  }
  SLOG(WARNING) << "leaving generation " << generation_ << ": " << why;
  on_abandon_(why);
}

std::string Heartbeat::abandoned() {
  absl::MutexLock lock(&mu_);
  return abandoned_;
}

absl::Status Heartbeat::Finish(const std::string& fatal_error, const std::string& watchdog) {
  return Close(fatal_error.empty() && watchdog.empty(), fatal_error, watchdog, 0, "");
}

absl::Status Heartbeat::ReportBadCheckpoint(int64_t step, const std::string& why) {
  return Close(false, "", "", step, why);
}

absl::Status Heartbeat::Close(bool finished, const std::string& fatal_error, const std::string& watchdog,
                              int64_t bad_step, const std::string& bad_why) {
  {
    absl::MutexLock lock(&mu_);
    closing_ = true;
  }
  if (sender_.joinable()) sender_.join();
  bool ok = SendReport(finished, fatal_error, watchdog, bad_step, bad_why);
  {
    absl::MutexLock lock(&write_mu_);
    ok = stream_->WritesDone() && ok;
  }
  if (reader_.joinable()) reader_.join();  // the coordinator ends the stream
  const grpc::Status s = stream_->Finish();
  if (!ok) return absl::UnavailableError("could not deliver the last report to the coordinator");
  return FromGrpcStatus(s);
}

}  // namespace shardline
