#include "worker/collective/faulty_transport.h"

#include <cstdint>
#include <map>
#include <optional>
#include <random>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/platform/logging.h"
#include "common/platform/mutex.h"
#include "common/platform/clock.h"
#include "common/platform/env.h"

namespace shardline {
namespace {

struct Faults {
  double delay_ms = 0;
  double jitter_ms = 0;
  double loss = 0;
  double reorder = 0;
  uint64_t seed = 0;
};

Faults ParseFaults(const std::string& text) {
  Faults f;
  for (absl::string_view item : absl::StrSplit(text, absl::ByAnyChar(" \t\n"), absl::SkipEmpty())) {
    const size_t eq = item.find('=');
    if (eq == absl::string_view::npos) continue;
    const absl::string_view key = item.substr(0, eq), value = item.substr(eq + 1);
    double v = 0;
    if (!absl::SimpleAtod(value, &v) || v < 0) continue;
    if (key == "delay_ms") f.delay_ms = v;
    if (key == "jitter_ms") f.jitter_ms = v;
    if (key == "loss") f.loss = v;
    if (key == "reorder") f.reorder = v;
    if (key == "seed") f.seed = static_cast<uint64_t>(v);
  }
  return f;
}

class FaultyTransport : public Transport {
 public:
  FaultyTransport(std::unique_ptr<Transport> inner, std::string control_file, Env* env)
      : inner_(std::move(inner)), control_file_(std::move(control_file)), env_(env) {}

  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }

  absl::Status Send(int peer, uint64_t tag, absl::Span<const char> data, absl::Time deadline) override {
    const Faults f = Current();
    double delay_ms = f.delay_ms;
    bool drop = false, hold = false;
    {
      MutexLock lock(&mu_);
      if (f.jitter_ms > 0) delay_ms += std::uniform_real_distribution<double>(0, f.jitter_ms)(rng_);
      drop = f.loss > 0 && std::uniform_real_distribution<double>(0, 1)(rng_) < f.loss;
      hold = !drop && f.reorder > 0 && held_.count(peer) == 0 &&
             std::uniform_real_distribution<double>(0, 1)(rng_) < f.reorder;
    }
    if (delay_ms > 0) {
      env_->SleepForMicros(absl::ToInt64Microseconds(std::min(absl::Milliseconds(delay_ms), deadline - WallNow(env_))));
    }
    if (drop) {
      SLOG(WARNING) << "fault injection: dropped the message with tag " << tag << " to rank " << peer;
      return absl::OkStatus();
    }
    if (hold) {
      MutexLock lock(&mu_);
      held_[peer] = Held{tag, data, deadline};
      return absl::OkStatus();
    }
    absl::Status sent = inner_->Send(peer, tag, data, deadline);
    sent.Update(Release(peer));  // the message held back for this peer goes after this one: reordered
    return sent;
  }

  absl::StatusOr<std::unique_ptr<Payload>> Receive(int peer, uint64_t tag, absl::Time deadline) override {
    if (absl::Status s = ReleaseAll(); !s.ok()) return s;
    return inner_->Receive(peer, tag, deadline);
  }
  absl::Status ExpectReceive(int peer, uint64_t tag,
                             std::function<absl::Status(std::unique_ptr<Payload>)> handler) override {
    if (absl::Status s = ReleaseAll(); !s.ok()) return s;
    return inner_->ExpectReceive(peer, tag, std::move(handler));
  }
  absl::Status AwaitReceive(int peer, uint64_t tag, absl::Time deadline) override {
    if (absl::Status s = ReleaseAll(); !s.ok()) return s;
    return inner_->AwaitReceive(peer, tag, deadline);
  }
  void CancelReceives() override { inner_->CancelReceives(); }
  absl::Status Flush(absl::Time deadline) override {
    if (absl::Status s = ReleaseAll(); !s.ok()) return s;
    return inner_->Flush(deadline);
  }
  void Shutdown() override { inner_->Shutdown(); }

 private:
  struct Held {
    uint64_t tag;
    absl::Span<const char> data;
    absl::Time deadline;
  };

  Faults Current() {
    MutexLock lock(&mu_);
    const absl::Time now = WallNow(env_);
    if (now - read_at_ >= absl::Milliseconds(100)) {
      read_at_ = now;
      // A missing file is no faults.
      const Faults f = ParseFaults(env_->ReadFile(control_file_, kMaxSmallFileBytes).value_or(""));
      if (f.seed != faults_.seed || !seeded_) {
        rng_.seed(f.seed + static_cast<uint64_t>(inner_->rank()));
        seeded_ = true;
      }
      faults_ = f;
    }
    return faults_;
  }

  absl::Status Release(int peer) {
    std::optional<Held> held;
    {
      MutexLock lock(&mu_);
      auto it = held_.find(peer);
      if (it == held_.end()) return absl::OkStatus();
      held = it->second;
      held_.erase(it);
    }
    return inner_->Send(peer, held->tag, held->data, held->deadline);
  }

  absl::Status ReleaseAll() {
    std::vector<int> peers;
    {
      MutexLock lock(&mu_);
      for (const auto& [peer, h] : held_) peers.push_back(peer);
    }
    absl::Status s;
    for (int peer : peers) s.Update(Release(peer));
    return s;
  }

  std::unique_ptr<Transport> inner_;
  const std::string control_file_;
  Env* const env_;
  Mutex mu_;
  absl::Time read_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  Faults faults_ ABSL_GUARDED_BY(mu_);
  bool seeded_ ABSL_GUARDED_BY(mu_) = false;
  std::mt19937_64 rng_ ABSL_GUARDED_BY(mu_);
  std::map<int, Held> held_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

std::unique_ptr<Transport> NewFaultyTransport(std::unique_ptr<Transport> inner, std::string control_file, Env* env) {
  return std::make_unique<FaultyTransport>(std::move(inner), std::move(control_file), env);
}

}  // namespace shardline
