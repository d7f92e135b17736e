#include "worker/control/heartbeat.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/net/auth_proof.h"
#include "common/net/grpc_util.h"
#include "common/platform/logging.h"
#include "common/platform/clock.h"

namespace shardline {

Heartbeat::Heartbeat(coordinator::Coordinator::StubInterface* stub, HeartbeatOptions options)
    : options_(std::move(options)), stop_request_(options_.stop_at) {
  SCHECK(options_.env != nullptr) << "HeartbeatOptions.env is required";
  if (!options_.proof.empty()) ctx_.AddMetadata(kProofMetadataKey, options_.proof);
  stream_ = stub->Heartbeat(&ctx_);
  SendReport({});  // the coordinator learns of the stream from its first report
  reader_ = std::thread([this] { ReadLoop(); });
  sender_ = std::thread([this] { SendLoop(); });
}

Heartbeat::~Heartbeat() {
  {
    MutexLock lock(&mu_);
    closing_ = true;
  }
  ctx_.TryCancel();
  if (sender_.joinable()) sender_.join();
  if (reader_.joinable()) reader_.join();
}

void Heartbeat::ReportStuck(const std::string& what) {
  MutexLock lock(&mu_);
  stuck_ = what;
}

coordinator::WorkerReport Heartbeat::Progress() const {
  coordinator::WorkerReport r;
  r.set_member_secret(options_.member_secret);
  r.set_rank(options_.rank);
  r.set_generation(options_.generation);
  r.set_steps_done(steps_done_.load());
  r.set_total_steps(total_steps_.load());
  r.set_sent_unix_micros(options_.env->NowUnixMicros());
  MutexLock lock(&time_mu_);
  *r.mutable_time() = time_;
  r.set_busy_seconds_per_step(busy_seconds_per_step_);
  if (outer_.has_value()) *r.mutable_outer() = *outer_;
  return r;
}

void Heartbeat::SetOuter(const coordinator::OuterStepStatus& outer) {
  MutexLock lock(&time_mu_);
  outer_ = outer;
}

void Heartbeat::SetTime(const coordinator::TimeAccount& account, double busy_seconds_per_step) {
  MutexLock lock(&time_mu_);
  time_ = account;
  busy_seconds_per_step_ = busy_seconds_per_step;
}

coordinator::WorkerReport Heartbeat::FinishedReportToResend() {
  coordinator::WorkerReport r = Progress();
  r.set_finished(true);
  MutexLock lock(&mu_);
  for (const coordinator::SavedShard& s : recent_saved_) *r.add_saved() = s;
  return r;
}

bool Heartbeat::SendReport(const LastReport& last) {
  coordinator::WorkerReport r = Progress();
  r.set_finished(last.finished);
  r.set_fatal_error(last.fatal_error);
  r.set_diverged_step(last.diverged_step);
  r.set_bad_memory_step(last.bad_memory_step);
  r.set_bad_checkpoint_step(last.bad_checkpoint_step);
  r.set_bad_checkpoint_reason(last.bad_checkpoint_reason);
  r.set_save_failed_step(last.save_failed_step);
  r.set_save_failure(last.save_failure);
  r.set_save_failure_code(static_cast<int32_t>(last.save_failure_code));
  r.set_left_reason(last.left_reason);
  outbox_.DrainInto(&r);
  {
    MutexLock lock(&mu_);
    if (!stuck_.empty()) r.set_watchdog(stuck_);
    recent_saved_.insert(recent_saved_.end(), r.saved().begin(), r.saved().end());
    if (recent_saved_.size() > kResendShards) {
      recent_saved_.erase(recent_saved_.begin(), recent_saved_.end() - kResendShards);
    }
  }
  MutexLock lock(&write_mu_);
  return stream_->Write(r);
}

void Heartbeat::SendLoop() {
  MutexLock lock(&mu_);
  for (;;) {
    auto closing = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return closing_; };
    if (mu_.AwaitWithTimeout(absl::Condition(&closing), options_.interval)) return;
    mu_.Unlock();
    const bool ok = SendReport({});
    mu_.Lock();
    if (!ok && !closing_) {
      mu_.Unlock();
      Abandon("the heartbeat stream to the coordinator broke");
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
    if (c.job_done()) job_done_.store(true);
    if (c.new_generation() > 0) {
      Abandon(absl::StrCat("the coordinator moved the world to generation ", c.new_generation()));
    }
  }
  bool closing;
  {
    MutexLock lock(&mu_);
    closing = closing_;
  }
  if (!closing && !job_done_.load()) Abandon("the coordinator ended the heartbeat stream");
  read_done_.Notify();
}

void Heartbeat::Abandon(const std::string& why) {
  {
    MutexLock lock(&mu_);
    if (!abandoned_.empty()) return;
    abandoned_ = why;
  }
  SLOG(WARNING) << "leaving generation " << options_.generation << ": " << why;
  if (options_.on_abandon) options_.on_abandon(why);
}

std::string Heartbeat::abandoned() {
  MutexLock lock(&mu_);
  return abandoned_;
}

absl::Status Heartbeat::Close(const LastReport& last, absl::Duration wait) {
  {
    MutexLock lock(&mu_);
    closing_ = true;
  }
  if (sender_.joinable()) sender_.join();
  bool ok = SendReport(last);
  {
    MutexLock lock(&write_mu_);
    ok = stream_->WritesDone() && ok;
  }
  // The coordinator ends the stream once it has the last report.
  const absl::Duration timeout = std::min(options_.close_timeout, wait);
  const bool ended = read_done_.WaitForNotificationWithTimeout(timeout);
  if (!ended) ctx_.TryCancel();
  if (reader_.joinable()) reader_.join();
  const grpc::Status s = stream_->Finish();
  if (!ok) return absl::UnavailableError("could not deliver the last report to the coordinator");
  if (!ended) {
    return absl::DeadlineExceededError(absl::StrCat("the coordinator did not end the heartbeat stream within ",
                                                    absl::FormatDuration(timeout), " of the last report"));
  }
  if (last.finished && !job_done_.load()) {
    return absl::AbortedError(
        s.ok() ? "the coordinator ended the heartbeat stream without saying the job is done"
               : absl::StrCat("the coordinator ended the heartbeat stream without saying the job is done: ",
                              s.error_message()));
  }
  if (last.finished) return absl::OkStatus();
  return FromGrpcStatus(s);
}

}  // namespace shardline
