// The coordinator's disk thread: every write of the job's durable state
// (RocksDB records, checkpoint commits, metric records) runs here, one
// task after another in the order submitted, so no RPC thread ever waits
// on the disk and no disk write runs under the job's lock. A stalled disk
// stalls this thread only: heartbeats, registrations that need nothing
// durable, and status are still answered.
//
//   DiskWriter writer({});
//   writer.Submit([&] { store->Put(...); });   // queued, runs soon
//   writer.Drain();                            // everything before it ran
#ifndef SHARDLINE_COORDINATOR_DISK_WRITER_H_
#define SHARDLINE_COORDINATOR_DISK_WRITER_H_

#include <cstddef>
#include <deque>
#include <functional>
#include <thread>

#include "common/platform/mutex.h"

namespace shardline {

struct DiskWriterOptions {
  // Tasks waiting at most; Submit refuses beyond it (the caller decides:
  // run it itself, or drop what can be dropped).
  size_t max_queued = 4096;
};

class DiskWriter {
 public:
  explicit DiskWriter(DiskWriterOptions options);
  // Runs every task still queued, then stops the thread.
  ~DiskWriter();
  DiskWriter(const DiskWriter&) = delete;
  DiskWriter& operator=(const DiskWriter&) = delete;

  // Queues `task`; false, and nothing queued, if max_queued wait already.
  bool Submit(std::function<void()> task) ABSL_LOCKS_EXCLUDED(mu_);

  // Returns once every task submitted before the call has run. Not from a
  // task (it would wait for itself).
  void Drain() ABSL_LOCKS_EXCLUDED(mu_);

  // True on the writer's own thread.
  bool OnWriterThread() const { return std::this_thread::get_id() == thread_.get_id(); }

 private:
  void Run();

  const DiskWriterOptions options_;
  Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  uint64_t submitted_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t done_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: started once everything above exists
};

}  // namespace shardline

#endif  // SHARDLINE_COORDINATOR_DISK_WRITER_H_
