#include "worker/collective/mailbox.h"

#include "absl/strings/str_cat.h"

namespace shardline {

Mailbox::Mailbox(int world_size)
    : world_size_(world_size), gone_(static_cast<size_t>(world_size)) {}

bool Mailbox::poisoned() {
  absl::MutexLock lock(&mu_);
  return !poison_.empty();
}

void Mailbox::Put(int src, uint64_t tag, std::unique_ptr<Payload> payload) {
  absl::MutexLock lock(&mu_);
  if (shutdown_) return;
  messages_[{src, tag}] = std::move(payload);
}

void Mailbox::MarkGone(int src, const std::string& why) {
  absl::MutexLock lock(&mu_);
  if (gone_[static_cast<size_t>(src)].empty()) gone_[static_cast<size_t>(src)] = why;
}

bool Mailbox::Poison(const std::string& why) {
  absl::MutexLock lock(&mu_);
  if (!poison_.empty()) return false;
  poison_ = why;
  return true;
}

void Mailbox::Shutdown() {
  absl::MutexLock lock(&mu_);
  shutdown_ = true;
  messages_.clear();
}

absl::StatusOr<std::unique_ptr<Payload>> Mailbox::Take(int src, uint64_t tag, absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  const auto key = std::make_pair(src, tag);
  auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return shutdown_ || messages_.count(key) > 0 || !gone_[static_cast<size_t>(src)].empty() ||
           !poison_.empty();
  };
  mu_.AwaitWithDeadline(absl::Condition(&ready), deadline);
  if (shutdown_) return absl::AbortedError(absl::StrCat("transport shut down while receiving from rank ", src));
  auto it = messages_.find(key);
  if (it == messages_.end()) {
    // A poison names the root cause (a peer dies, its neighbours then leave),
    // so it wins over the sender's own departure.
    if (!poison_.empty()) return absl::UnavailableError(poison_);
    if (!gone_[static_cast<size_t>(src)].empty()) {
      return absl::UnavailableError(absl::StrCat("peer rank ", src, " is gone: ", gone_[static_cast<size_t>(src)]));
    }
    return absl::DeadlineExceededError(
        absl::StrCat("peer rank ", src, " sent nothing for tag ", tag, " before the deadline"));
  }
  std::unique_ptr<Payload> payload = std::move(it->second);
  messages_.erase(it);
  return payload;
}

}  // namespace shardline
