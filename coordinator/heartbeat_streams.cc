#include "coordinator/heartbeat_streams.h"

#include <optional>

#include "common/grpc_util.h"
#include "common/logging.h"

namespace shardline {

// One worker's Heartbeat call. Reads run back to back; at most one write is
// in flight; Finish is called exactly once, by whichever side ends it.
class HeartbeatStream : public grpc::ServerBidiReactor<coordinator::WorkerReport, coordinator::CoordinatorCommand> {
 public:
  HeartbeatStream(HeartbeatStreams* owner, grpc::CallbackServerContext* ctx) : owner_(owner), ctx_(ctx) {
    if (grpc::Status s = CheckToken(owner_->auth_, *ctx); !s.ok()) {
      FinishOnce(s);
      return;
    }
    StartRead(&report_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      // The worker closed its side (or the call broke). A worker that
      // finished keeps the stream until the job's end or a new generation
      // reaches it (the pump sends that, then finishes).
      bool linger = false;
      if (registered_ && !ctx_->IsCancelled()) linger = owner_->job_->AwaitsJobEnd(rank_, generation_);
      MutexLock lock(&mu_);
      if (!linger) FinishLocked(grpc::Status::OK);
      return;
    }
    const absl::Status accepted = owner_->job_->Report(report_);
    if (!registered_) {
      if (absl::IsPermissionDenied(accepted) && owner_->auth_ != nullptr) {
        owner_->auth_->Refused(RejectReason::kNotAMember, ctx_->peer());
      }
      if (!accepted.ok()) {
        MutexLock lock(&mu_);
        FinishLocked(ToGrpcStatus(accepted));
        return;
      }
      rank_ = report_.rank();
      generation_ = report_.generation();
      registered_ = true;
      owner_->Add(this);
    } else if (!accepted.ok()) {
      SLOG(WARNING) << "ending rank " << rank_ << "'s heartbeat stream: " << accepted;
      MutexLock lock(&mu_);
      FinishLocked(grpc::Status::OK);
      return;
    }
    StartRead(&report_);
  }

  void OnWriteDone(bool ok) override {
    MutexLock lock(&mu_);
    writing_ = false;
    if (!ok || end_after_write_) {
      FinishLocked(grpc::Status::OK);
    } else if (missed_) {
      PollLocked();  // news came while the last command was being written
    }
  }

  void OnCancel() override {
    MutexLock lock(&mu_);
    cancelled_ = true;
  }

  void OnDone() override {
    bool broken;
    {
      MutexLock lock(&mu_);
      broken = cancelled_ && !ended_here_;
    }
    if (registered_) owner_->job_->StreamEnded(rank_, generation_, broken);
    owner_->Retire(this);
  }

  // From the pump: writes the stream's next command if it has one.
  void Poll() {
    MutexLock lock(&mu_);
    PollLocked();
  }

 private:
  void PollLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_ || !registered_) return;
    if (writing_) {
      missed_ = true;  // OnWriteDone polls again
      return;
    }
    missed_ = false;
    bool end = false;
    std::optional<coordinator::CoordinatorCommand> c =
        owner_->job_->NextCommand(rank_, generation_, last_, absl::ZeroDuration(), &end);
    if (end) ended_here_ = true;
    if (c.has_value()) {
      last_ = *c;
      out_ = *c;
      writing_ = true;
      end_after_write_ = end;
      StartWrite(&out_);
    } else if (end) {
      FinishLocked(grpc::Status::OK);
    }
  }

  void FinishOnce(const grpc::Status& s) {
    MutexLock lock(&mu_);
    FinishLocked(s);
  }
  // Ends the call once no write is in flight (OnWriteDone comes back here
  // otherwise); a pending read is failed by the end.
  void FinishLocked(const grpc::Status& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_) return;
    if (writing_) {
      end_after_write_ = true;
      return;
    }
    finished_ = true;
    Finish(s);
  }

  HeartbeatStreams* const owner_;
  grpc::CallbackServerContext* const ctx_;
  // Touched only by the read side (one read at a time); registered_ is set
  // before Add, so the pump sees it set.
  coordinator::WorkerReport report_;
  bool registered_ = false;
  int rank_ = -1;
  uint64_t generation_ = 0;

  Mutex mu_;
  coordinator::CoordinatorCommand last_ ABSL_GUARDED_BY(mu_);
  coordinator::CoordinatorCommand out_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool missed_ ABSL_GUARDED_BY(mu_) = false;  // a poll found a write in flight
  bool end_after_write_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool ended_here_ ABSL_GUARDED_BY(mu_) = false;
};

HeartbeatStreams::HeartbeatStreams(Job* job, RpcAuth* auth) : job_(job), auth_(auth) {
  pump_ = std::thread([this] { Pump(); });
}

HeartbeatStreams::~HeartbeatStreams() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  pump_.join();
  MutexLock lock(&mu_);
  for (HeartbeatStream* s : retired_) delete s;
  retired_.clear();
}

grpc::ServerBidiReactor<coordinator::WorkerReport, coordinator::CoordinatorCommand>* HeartbeatStreams::NewStream(
    grpc::CallbackServerContext* ctx) {
  return new HeartbeatStream(this, ctx);
}

size_t HeartbeatStreams::open() {
  MutexLock lock(&mu_);
  return live_.size();
}

void HeartbeatStreams::Add(HeartbeatStream* s) {
  MutexLock lock(&mu_);
  live_.insert(s);
}

void HeartbeatStreams::Retire(HeartbeatStream* s) {
  MutexLock lock(&mu_);
  live_.erase(s);
  retired_.push_back(s);
}

void HeartbeatStreams::Pump() {
  uint64_t seen = 0;
  for (;;) {
    // Woken by news; every 200 ms regardless, as a safety net (a stream
    // that registered after the news still gets its commands).
    job_->AwaitCommandNews(&seen, absl::Milliseconds(200));
    job_->CompleteRegistrations();
    std::vector<HeartbeatStream*> streams, dead;
    {
      MutexLock lock(&mu_);
      if (stop_) return;
      // Retired streams are freed here, where no sweep holds them.
      dead.swap(retired_);
      streams.assign(live_.begin(), live_.end());
    }
    for (HeartbeatStream* s : dead) delete s;
    for (HeartbeatStream* s : streams) s->Poll();
  }
}

}  // namespace shardline
