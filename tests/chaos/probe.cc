#include "tests/chaos/probe.h"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "tests/e2e/e2e_util.h"
#include "tests/util/http.h"

namespace shardline {

Probe::Probe(std::string netns_path, std::string workdir)
    : netns_path_(std::move(netns_path)), workdir_(std::move(workdir)) {
  thread_ = std::thread([this] { Run(); });
}

Probe::~Probe() {
  stop_ = true;
  thread_.join();
}

ProbeSample Probe::Take() {
  ProbeSample s;
  s.time = absl::Now();
  std::ifstream in(workdir_ + "/coordinator.metrics_address");
  std::string address;
  in >> address;
  int port = 0;
  if (address.empty() || !absl::SimpleAtoi(address.substr(address.rfind(':') + 1), &port)) return s;
  absl::StatusOr<std::string> page = HttpGet(port, "/metrics");
  if (!page.ok()) return s;
  const double generation = PromValue(*page, "shardline_generation");
  const double step = PromValue(*page, "shardline_global_step");
  const double last = PromValue(*page, "shardline_last_checkpoint_step");
  if (std::isnan(generation) || std::isnan(step)) return s;
  s.up = true;
  s.generation = static_cast<int64_t>(generation);
  s.step = static_cast<int64_t>(step);
  s.last_checkpoint = std::isnan(last) ? 0 : static_cast<int64_t>(last);
  for (absl::string_view line : absl::StrSplit(*page, '\n')) {
    if (absl::StartsWith(line, "shardline_job_state{") && absl::EndsWith(line, " 1")) {
      const size_t q = line.find('"');
      s.state = std::string(line.substr(q + 1, line.find('"', q + 1) - q - 1));
    }
  }
  return s;
}

void Probe::Run() {
  // This thread alone moves into the coordinator's namespace: its sockets
  // reach the coordinator's loopback-only metrics port.
  const int ns = open(netns_path_.c_str(), O_RDONLY | O_CLOEXEC);
  const bool entered = ns >= 0 && setns(ns, CLONE_NEWNET) == 0;
  if (ns >= 0) close(ns);
  while (!stop_.load()) {
    ProbeSample s = entered ? Take() : ProbeSample{absl::Now()};
    {
      MutexLock lock(&mu_);
      if (!s.up && !samples_.empty()) {
        // Keep the last known values; mark only that nothing answered.
        const ProbeSample& last = samples_.back();
        s.generation = last.generation;
        s.step = last.step;
        s.last_checkpoint = last.last_checkpoint;
        s.state = last.state;
      }
      samples_.push_back(std::move(s));
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
}

ProbeSample Probe::Latest() {
  MutexLock lock(&mu_);
  return samples_.empty() ? ProbeSample{absl::Now()} : samples_.back();
}

std::vector<ProbeSample> Probe::Since(absl::Time since) {
  MutexLock lock(&mu_);
  std::vector<ProbeSample> out;
  for (const ProbeSample& s : samples_) {
    if (s.time >= since) out.push_back(s);
  }
  return out;
}

ProbeSample Probe::WaitFor(const std::function<bool(const ProbeSample&)>& pred, absl::Duration timeout) {
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + timeout;
  size_t seen = 0;
  {
    MutexLock lock(&mu_);
    seen = samples_.size();
  }
  while (absl::Now() < deadline) {
    {
      MutexLock lock(&mu_);
      for (; seen < samples_.size(); ++seen) {
        if (pred(samples_[seen])) return samples_[seen];
      }
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  ProbeSample none;
  none.time = absl::InfinitePast();
  return none;
}

}  // namespace shardline
