#include "worker/collective/mailbox.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace shardline {

Mailbox::Mailbox(int world_size, int64_t max_unclaimed_bytes_per_source, int64_t max_unclaimed_messages_per_source)
    : world_size_(world_size),
      max_unclaimed_(max_unclaimed_bytes_per_source),
      max_unclaimed_messages_(max_unclaimed_messages_per_source),
      gone_(static_cast<size_t>(world_size)),
      unclaimed_(static_cast<size_t>(world_size), 0),
      unclaimed_count_(static_cast<size_t>(world_size), 0) {}

bool Mailbox::poisoned() {
  MutexLock lock(&mu_);
  return !poison_.empty();
}

absl::Status Mailbox::Put(int src, uint64_t tag, std::unique_ptr<Payload> payload) {
  MutexLock lock(&mu_);
  if (shutdown_) return absl::OkStatus();
  auto it = expected_.find({src, tag});
  if (it != expected_.end() && it->second.handler) {
    Run(it, std::move(payload));
    return absl::OkStatus();
  }
  int64_t& waiting = unclaimed_[static_cast<size_t>(src)];
  int64_t& count = unclaimed_count_[static_cast<size_t>(src)];
  std::unique_ptr<Payload>& slot = messages_[{src, tag}];
  if (slot != nullptr) {  // a repeated tag replaces
    waiting -= static_cast<int64_t>(slot->size());
    --count;
  }
  const int64_t size = static_cast<int64_t>(payload->size());
  if (waiting + size > max_unclaimed_ || count + 1 > max_unclaimed_messages_) {
    messages_.erase({src, tag});
    const std::string why =
        waiting + size > max_unclaimed_
            ? absl::StrCat("it sent ", waiting + size, " bytes no receive asked for (at most ", max_unclaimed_,
                           " may wait per peer)")
            : absl::StrCat("it sent ", count + 1, " messages no receive asked for (at most ",
                           max_unclaimed_messages_, " may wait per peer)");
    std::string& gone = gone_[static_cast<size_t>(src)];
    if (gone.empty()) gone = why;
    return absl::ResourceExhaustedError(absl::StrCat("peer rank ", src, " is faulty: ", why));
  }
  waiting += size;
  ++count;
  slot = std::move(payload);
  return absl::OkStatus();
}

void Mailbox::Run(std::map<std::pair<int, uint64_t>, Expected>::iterator it, std::unique_ptr<Payload> payload) {
  ReceiveHandler handler = std::move(it->second.handler);
  it->second.handler = nullptr;
  ++running_;
  mu_.Unlock();
  absl::Status status = handler(std::move(payload));
  mu_.Lock();
  --running_;
  // A started entry is never erased by CancelExpected, so `it` is valid.
  it->second.done = true;
  it->second.status = std::move(status);
}

void Mailbox::Expect(int src, uint64_t tag, ReceiveHandler handler) {
  MutexLock lock(&mu_);
  auto [it, inserted] = expected_.insert({{src, tag}, Expected{std::move(handler)}});
  if (!inserted) return;
  auto msg = messages_.find({src, tag});
  if (msg == messages_.end()) return;
  std::unique_ptr<Payload> payload = std::move(msg->second);
  messages_.erase(msg);
  unclaimed_[static_cast<size_t>(src)] -= static_cast<int64_t>(payload->size());
  --unclaimed_count_[static_cast<size_t>(src)];
  Run(it, std::move(payload));
}

absl::Status Mailbox::Await(int src, uint64_t tag, absl::Time deadline) {
  MutexLock lock(&mu_);
  const auto key = std::make_pair(src, tag);
  auto it = expected_.find(key);
  if (it == expected_.end()) {
    return absl::InternalError(absl::StrCat("no receive from rank ", src, " expected for tag ", tag));
  }
  auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return shutdown_ || it->second.done || !gone_[static_cast<size_t>(src)].empty() || !poison_.empty();
  };
  mu_.AwaitWithDeadline(absl::Condition(&ready), deadline);
  if (shutdown_) return absl::AbortedError(absl::StrCat("transport shut down while receiving from rank ", src));
  if (it->second.done) {
    absl::Status status = std::move(it->second.status);
    expected_.erase(it);
    return status;
  }
  return Unreachable(src, tag);
}

void Mailbox::DropUnstarted() {
  for (auto it = expected_.begin(); it != expected_.end();) {
    it = it->second.handler ? expected_.erase(it) : std::next(it);
  }
}

void Mailbox::CancelExpected() {
  MutexLock lock(&mu_);
  DropUnstarted();
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return running_ == 0; };
  mu_.Await(absl::Condition(&idle));
  expected_.clear();
}

void Mailbox::MarkGone(int src, const std::string& why) {
  MutexLock lock(&mu_);
  if (gone_[static_cast<size_t>(src)].empty()) gone_[static_cast<size_t>(src)] = why;
}

bool Mailbox::IsGone(int src) {
  MutexLock lock(&mu_);
  return !gone_[static_cast<size_t>(src)].empty();
}

bool Mailbox::Poison(const std::string& why) {
  MutexLock lock(&mu_);
  if (!poison_.empty()) return false;
  poison_ = why;
  return true;
}

void Mailbox::Shutdown() {
  MutexLock lock(&mu_);
  shutdown_ = true;
  messages_.clear();
  std::fill(unclaimed_.begin(), unclaimed_.end(), 0);
  std::fill(unclaimed_count_.begin(), unclaimed_count_.end(), 0);
  DropUnstarted();  // Put drops messages now: they never would start
}

absl::StatusOr<std::unique_ptr<Payload>> Mailbox::Take(int src, uint64_t tag, absl::Time deadline) {
  MutexLock lock(&mu_);
  const auto key = std::make_pair(src, tag);
  auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return shutdown_ || messages_.count(key) > 0 || !gone_[static_cast<size_t>(src)].empty() ||
           !poison_.empty();
  };
  mu_.AwaitWithDeadline(absl::Condition(&ready), deadline);
  if (shutdown_) return absl::AbortedError(absl::StrCat("transport shut down while receiving from rank ", src));
  auto it = messages_.find(key);
  if (it == messages_.end()) return Unreachable(src, tag);
  std::unique_ptr<Payload> payload = std::move(it->second);
  messages_.erase(it);
  unclaimed_[static_cast<size_t>(src)] -= static_cast<int64_t>(payload->size());
  --unclaimed_count_[static_cast<size_t>(src)];
  return payload;
}

absl::Status Mailbox::Unreachable(int src, uint64_t tag) {
  // A poison names the root cause (a peer dies, its neighbours then leave),
  // so it wins over the sender's own departure.
  if (!poison_.empty()) return absl::UnavailableError(poison_);
  if (!gone_[static_cast<size_t>(src)].empty()) {
    return absl::UnavailableError(absl::StrCat("peer rank ", src, " is gone: ", gone_[static_cast<size_t>(src)]));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("peer rank ", src, " sent nothing for tag ", tag, " before the deadline"));
}

}  // namespace shardline
