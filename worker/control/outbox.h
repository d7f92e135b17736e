// What a worker has to tell the coordinator that is not a counter: metric
// records (rank 0's train and eval lines) and the checkpoint shards it has
// written. The training loop writes into it as a MetricsSink and a
// CheckpointSink; the heartbeat drains it into its next report.
//
//   Outbox outbox;
//   options.metrics = &outbox;  options.checkpoint_sink = &outbox;
//   ... on the heartbeat thread:
//   coordinator::WorkerReport report;
//   outbox.DrainInto(&report);
#ifndef SHARDLINE_WORKER_CONTROL_OUTBOX_H_
#define SHARDLINE_WORKER_CONTROL_OUTBOX_H_

#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "common/observability/metrics_writer.h"
#include "common/platform/mutex.h"
#include "proto/coordinator.pb.h"
#include "worker/checkpoint/save_restore.h"

namespace shardline {

// Thread-safe. Nothing written is lost or duplicated: each item is moved
// into exactly one DrainInto().
class Outbox : public MetricsSink, public CheckpointSink {
 public:
  absl::Status Write(const metrics::MetricRecord& record) override;
  // Queues the shard for the coordinator, which commits the step once every
  // rank's shard is in. Only the file's base name is sent.
  absl::Status ShardSaved(int64_t step, int rank, int world, const WrittenShard& shard) override;

  // Queues this process's numerics fingerprint for the next report: before
  // any shard it saves in the generation, so the coordinator judges it
  // first (one report carries both in that order of processing).
  void NumericsReady(const coordinator::Numerics& numerics);

  // Moves everything queued so far into `report` (appending to its metrics
  // and saved lists, setting its numerics).
  void DrainInto(coordinator::WorkerReport* report);

 private:
  Mutex mu_;
  std::vector<metrics::MetricRecord> records_ ABSL_GUARDED_BY(mu_);
  std::vector<coordinator::SavedShard> saved_ ABSL_GUARDED_BY(mu_);
  std::optional<coordinator::Numerics> numerics_ ABSL_GUARDED_BY(mu_);
};

}  // namespace shardline

#endif  // SHARDLINE_WORKER_CONTROL_OUTBOX_H_
