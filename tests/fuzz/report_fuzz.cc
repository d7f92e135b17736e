// The coordinator's handling of Register and Heartbeat messages, through the
// Job's API (no network): the first byte picks the message and whether it
// comes from the member (its secret filled in, as an insider's would be) or
// from anyone; the rest is the message's wire bytes.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/job/config.h"
#include "common/observability/metrics_writer.h"
#include "coordinator/job.h"
#include "coordinator/job_store.h"

namespace {

class NoMetrics : public shardline::MetricsSink {
 public:
  absl::Status Write(const shardline::metrics::MetricRecord&) override { return absl::OkStatus(); }
};

struct World {
  std::unique_ptr<shardline::JobStore> store;
  NoMetrics sink;
  std::unique_ptr<shardline::Job> job;
  shardline::coordinator::RegisterResponse member;

  // A fresh job whose world of one has formed.
  void Reset() {
    job.reset();
    store.reset();
    const std::string dir = "/tmp/shardline_report_fuzz_" + std::to_string(getpid());
    (void)shardline::Env::Default()->DeleteRecursively(dir);
    store = *shardline::JobStore::Open(shardline::Env::Default(), dir + "/db");
    shardline::CoordinatorOptions o;
    o.env = shardline::Env::Default();
    o.world_size = 1;
    o.checkpoint_root = dir + "/checkpoints";
    job = std::make_unique<shardline::Job>(*shardline::ParseConfigText("train { total_steps: 100 }", "fuzz"),
                                           store.get(), &sink, o);
    (void)job->Init();
    shardline::coordinator::RegisterRequest r;
    r.set_transport_address("127.0.0.1:1");
    r.set_requested_rank(0);
    r.set_incarnation(1);
    member = *job->Register(r, [] { return false; });
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static World* world = [] {
    auto* w = new World;
    w->Reset();
    return w;
  }();
  if (size == 0) return 0;
  const uint8_t op = data[0];
  const std::string bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  const shardline::coordinator::JobStatus status = world->job->Snapshot();
  if (status.state() == shardline::coordinator::JobStatus::FAILED ||
      status.state() == shardline::coordinator::JobStatus::DONE) {
    world->Reset();
  }
  if (op & 1) {
    shardline::coordinator::RegisterRequest r;
    if (!r.ParseFromString(bytes)) return 0;
    (void)world->job->Register(r, [] { return true; });  // never waits
  } else {
    shardline::coordinator::WorkerReport r;
    if (!r.ParseFromString(bytes)) return 0;
    if (op & 2) {  // from the member itself
      r.set_rank(world->member.rank());
      r.set_generation(world->member.generation());
      r.set_member_secret(world->member.member_secret());
    }
    (void)world->job->Report(r);
  }
  world->job->CheckHeartbeats();
  return 0;
}
