#include "coordinator/disk_writer.h"

#include <utility>

namespace shardline {

DiskWriter::DiskWriter(DiskWriterOptions options) : options_(options), thread_([this] { Run(); }) {}

DiskWriter::~DiskWriter() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

bool DiskWriter::Submit(std::function<void()> task) {
  MutexLock lock(&mu_);
  if (queue_.size() >= options_.max_queued) return false;
  queue_.push_back(std::move(task));
  ++submitted_;
  return true;
}

void DiskWriter::Drain() {
  MutexLock lock(&mu_);
  const uint64_t target = submitted_;
  auto ran = [this, target]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return done_ >= target; };
  mu_.Await(absl::Condition(&ran));
}

void DiskWriter::Run() {
  for (;;) {
    std::function<void()> task;
    {
      MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || !queue_.empty(); };
      mu_.Await(absl::Condition(&ready));
      if (queue_.empty()) return;  // stopping, and nothing left
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
    MutexLock lock(&mu_);
    ++done_;
  }
}

}  // namespace shardline
