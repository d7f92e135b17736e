#include "coordinator/heartbeat_streams.h"

#include <optional>

#include "common/net/grpc_util.h"
#include "common/platform/logging.h"
#include "common/platform/clock.h"

namespace shardline {

// One worker's Heartbeat call, from the moment it is readied until gRPC has
// returned every tag it was given. All of a stream's events run on its
// queue's thread, one at a time; the pump adds writes. Reads run back to
// back; at most one write is in flight; Finish is started at most once, by
// whichever side ends the call; nothing is started once the call is done.
class HeartbeatStream : public AsyncCall {
 public:
  enum Op { kReady, kRead, kWrite, kFinish, kDone, kOps };

  HeartbeatStream(HeartbeatStreams* owner, grpc::ServerCompletionQueue* cq) : owner_(owner), cq_(cq), rw_(&ctx_) {
    for (int i = 0; i < kOps; ++i) tags_[i] = CallTag{this, i};
  }

  // Asks gRPC for the next call on this stream's queue.
  void Ready(const HeartbeatStreams::RequestFn& request) {
    ctx_.AsyncNotifyWhenDone(&tags_[kDone]);
    {
      MutexLock lock(&mu_);
      pending_ = 1;
    }
    request(&ctx_, &rw_, cq_, &tags_[kReady]);
  }

  // One of this stream's operations completed; the stream is retired when
  // none is left in flight.
  void Complete(int op, bool ok) override {
    switch (op) {
      case kReady:
        OnReady(ok);
        break;
      case kRead:
        OnRead(ok);
        break;
      case kWrite:
        OnWrite(ok);
        break;
      case kFinish:
        break;
      case kDone:
        OnDone();
        break;
      case kOps:
        break;
    }
    bool over;
    {
      MutexLock lock(&mu_);
      over = --pending_ == 0;
    }
    if (over) owner_->Retire(this);
  }

  // From the pump: writes the stream's next command if it has one.
  void Poll() {
    MutexLock lock(&mu_);
    PollLocked();
  }

 private:
  void OnReady(bool ok) {
    // Not ok: the server is shutting down and this call was never matched
    // (gRPC then never returns the done tag).
    if (!ok) return;
    owner_->Ready(cq_);
    const grpc::Status token =
        CheckToken(owner_->auth_, ctx_, coordinator::WorkerReport::descriptor()->full_name(), CallAccess::kMember);
    MutexLock lock(&mu_);
    ++pending_;  // the done tag
    if (!token.ok()) {
      FinishLocked(token);
    } else {
      ReadLocked();
    }
  }

  void OnRead(bool ok) {
    if (!ok) {
      // The worker closed its side (or the call broke). A worker that
      // finished keeps the stream until the job's end or a new generation
      // reaches it (the pump sends that, then finishes).
      bool linger = false;
      if (registered_ && !ctx_.IsCancelled()) linger = owner_->job_->AwaitsJobEnd(rank_, generation_);
      MutexLock lock(&mu_);
      if (!linger) FinishLocked(grpc::Status::OK);
      return;
    }
    const absl::Status accepted = owner_->job_->Report(report_);
    if (!registered_) {
      if (absl::IsPermissionDenied(accepted) && owner_->auth_ != nullptr) {
        owner_->auth_->Refused(RejectReason::kNotAMember, ctx_.peer());
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
      Poll();  // news the pump swept before Add is not missed
    } else if (!accepted.ok()) {
      SLOG(WARNING) << "ending rank " << rank_ << "'s heartbeat stream: " << accepted;
      MutexLock lock(&mu_);
      FinishLocked(grpc::Status::OK);
      return;
    }
    MutexLock lock(&mu_);
    ReadLocked();
  }

  void OnWrite(bool ok) {
    MutexLock lock(&mu_);
    writing_ = false;
    if (!ok || end_after_write_) {
      FinishLocked(grpc::Status::OK);
    } else if (missed_) {
      PollLocked();  // news came while the last command was being written
    }
  }

  void OnDone() {
    bool broken;
    {
      MutexLock lock(&mu_);
      done_ = true;
      broken = ctx_.IsCancelled() && !ended_here_;
    }
    if (registered_) owner_->job_->StreamEnded(rank_, generation_, broken);
  }

  // Counts an operation about to start; false: none may start any more.
  bool BeginLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (done_ || owner_->queues_->stopping()) return false;
    ++pending_;
    return true;
  }

  void ReadLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!finished_ && BeginLocked()) rw_.Read(&report_, &tags_[kRead]);
  }

  void PollLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_ || done_ || !registered_) return;
    if (writing_) {
      missed_ = true;  // OnWrite polls again
      return;
    }
    missed_ = false;
    bool end = false;
    std::optional<coordinator::CoordinatorCommand> c =
        owner_->job_->NextCommand(rank_, generation_, last_, absl::ZeroDuration(), &end);
    if (end) ended_here_ = true;
    if (c.has_value()) {
      if (!BeginLocked()) return;
      last_ = *c;
      out_ = *c;
      writing_ = true;
      end_after_write_ = end;
      rw_.Write(out_, &tags_[kWrite]);
    } else if (end) {
      FinishLocked(grpc::Status::OK);
    }
  }

  // Ends the call once no write is in flight (OnWrite comes back here
  // otherwise); a pending read is failed by the end.
  void FinishLocked(const grpc::Status& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_) return;
    if (writing_) {
      end_after_write_ = true;
      return;
    }
    finished_ = true;
    if (BeginLocked()) rw_.Finish(s, &tags_[kFinish]);
  }

  HeartbeatStreams* const owner_;
  grpc::ServerCompletionQueue* const cq_;
  grpc::ServerContext ctx_;
  HeartbeatStreams::ReaderWriter rw_;
  CallTag tags_[kOps];
  // Touched only on the queue's thread (one event at a time); registered_
  // is set before Add, so the pump sees it set.
  coordinator::WorkerReport report_;
  bool registered_ = false;
  int rank_ = -1;
  uint64_t generation_ = 0;

  Mutex mu_;
  int pending_ ABSL_GUARDED_BY(mu_) = 0;  // operations started, not yet completed
  coordinator::CoordinatorCommand last_ ABSL_GUARDED_BY(mu_);
  coordinator::CoordinatorCommand out_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool missed_ ABSL_GUARDED_BY(mu_) = false;  // a poll found a write in flight
  bool end_after_write_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;  // gRPC returned the done tag
  bool ended_here_ ABSL_GUARDED_BY(mu_) = false;
};

HeartbeatStreams::HeartbeatStreams(Job* job, RpcAuth* auth, CallQueues* queues, HeartbeatStreamsOptions options)
    : job_(job), auth_(auth), queues_(queues), options_(options) {}

HeartbeatStreams::~HeartbeatStreams() {
  StopPump();
  MutexLock lock(&mu_);
  for (HeartbeatStream* s : retired_) delete s;
  for (HeartbeatStream* s : all_) delete s;
}

void HeartbeatStreams::Start(RequestFn request) {
  request_ = std::move(request);
  for (size_t q = 0; q < queues_->size(); ++q) {
    for (int i = 0; i < std::max(1, options_.ready_per_queue); ++i) Ready(queues_->queue(q));
  }
  pump_ = std::thread([this] { Pump(); });
}

void HeartbeatStreams::StopPump() {
  {
    MutexLock lock(&mu_);
    stop_pump_ = true;
  }
  if (pump_.joinable()) pump_.join();
}

void HeartbeatStreams::Ready(grpc::ServerCompletionQueue* cq) {
  if (queues_->stopping()) return;
  MutexLock lock(&mu_);
  auto* s = new HeartbeatStream(this, cq);
  all_.insert(s);
  s->Ready(request_);
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
  all_.erase(s);
  live_.erase(s);
  retired_.push_back(s);
}

void HeartbeatStreams::Pump() {
  uint64_t seen = 0;
  absl::Time last_sweep = absl::InfinitePast();
  for (;;) {
    // Sweeps on news (a stream polls itself once as it registers, so none
    // misses news swept before it was added), and every second regardless,
    // as a safety net; looks for a stop every 100 ms.
    const uint64_t before = seen;
    job_->AwaitCommandNews(&seen, absl::Milliseconds(100));
    job_->CompleteRegistrations();
    const absl::Time now = MonotonicNow(job_->env());
    if (seen == before && now - last_sweep < absl::Seconds(1)) {
      MutexLock lock(&mu_);
      if (stop_pump_) return;
      continue;
    }
    last_sweep = now;
    std::vector<HeartbeatStream*> streams, dead;
    {
      MutexLock lock(&mu_);
      if (stop_pump_) return;
      // Retired streams are freed here, where no sweep holds them.
      dead.swap(retired_);
      streams.assign(live_.begin(), live_.end());
    }
    for (HeartbeatStream* s : dead) delete s;
    for (HeartbeatStream* s : streams) s->Poll();
  }
}

}  // namespace shardline
