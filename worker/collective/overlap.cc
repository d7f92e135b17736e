#include "worker/collective/overlap.h"
#include "common/platform/clock.h"

#include <utility>

namespace shardline {

OverlapCollectives::OverlapCollectives(Collectives* inner, Env* env)
    : inner_(inner), env_(env), thread_([this] { Loop(); }) {}

OverlapCollectives::~OverlapCollectives() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void OverlapCollectives::Loop() {
  for (;;) {
    std::function<absl::Status()> op;
    absl::Status failed;
    {
      MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !queue_.empty() || stopping_; };
      mu_.Await(absl::Condition(&ready));
      if (queue_.empty()) return;  // stopping, and nothing left
      op = std::move(queue_.front());
      queue_.pop_front();
      failed = failed_;
    }
    OpResult result;
    Stopwatch watch(env_);
    if (failed.ok()) {
      result.status = op();
      result.nonfinite_source = inner_->nonfinite_source();
    } else {
      result.status = failed;  // the world is broken: run nothing more
    }
    const double took = watch.Lap();
    MutexLock lock(&mu_);
    busy_seconds_ += took;
    if (failed_.ok() && !result.status.ok()) failed_ = result.status;
    results_[++finished_] = std::move(result);
  }
}

Ticket OverlapCollectives::Start(std::function<absl::Status()> op) {
  MutexLock lock(&mu_);
  queue_.push_back(std::move(op));
  return ++started_;
}

Ticket OverlapCollectives::StartReduceScatter(absl::Span<float> buffer) {
  return Start([this, buffer] { return inner_->ReduceScatter(buffer); });
}

Ticket OverlapCollectives::StartAllGather(absl::Span<float> buffer) {
  return Start([this, buffer] { return inner_->AllGather(buffer); });
}

OpResult OverlapCollectives::Wait(Ticket ticket) {
  MutexLock lock(&mu_);
  auto done = [this, ticket]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return finished_ >= ticket; };
  mu_.Await(absl::Condition(&done));
  auto it = results_.find(ticket);
  if (it == results_.end()) return OpResult{absl::InternalError("a collective's result was waited for twice"), -1};
  OpResult r = std::move(it->second);
  results_.erase(it);
  return r;
}

absl::Status OverlapCollectives::Drain() {
  MutexLock lock(&mu_);
  auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return finished_ == started_; };
  mu_.Await(absl::Condition(&done));
  return failed_;
}

double OverlapCollectives::busy_seconds() {
  MutexLock lock(&mu_);
  return busy_seconds_;
}

absl::Status OverlapCollectives::ReduceScatter(absl::Span<float> buffer) {
  if (absl::Status s = Drain(); !s.ok()) return s;
  return inner_->ReduceScatter(buffer);
}

absl::Status OverlapCollectives::AllGather(absl::Span<float> buffer) {
  if (absl::Status s = Drain(); !s.ok()) return s;
  return inner_->AllGather(buffer);
}

absl::Status OverlapCollectives::AllReduceScalars(absl::Span<double> values, absl::Span<const ReduceOp> ops) {
  if (absl::Status s = Drain(); !s.ok()) return s;
  return inner_->AllReduceScalars(values, ops);
}

absl::StatusOr<std::string> OverlapCollectives::SendRecv(int send_to, absl::string_view data, int recv_from) {
  if (absl::Status s = Drain(); !s.ok()) return s;
  return inner_->SendRecv(send_to, data, recv_from);
}

}  // namespace shardline
