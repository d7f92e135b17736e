#include "worker/control/outbox.h"

namespace shardline {

absl::Status Outbox::Write(const metrics::MetricRecord& record) {
  MutexLock lock(&mu_);
  records_.push_back(record);
  return absl::OkStatus();
}

absl::Status Outbox::ShardSaved(int64_t step, int rank, int world, const WrittenShard& shard) {
  coordinator::SavedShard s;
  s.set_step(step);
  s.set_world_size(world);
  s.set_file(shard.path.substr(shard.path.rfind('/') + 1));
  s.set_size(shard.size);
  s.set_crc32c(shard.crc32c);
  s.set_best(shard.best);
  s.set_best_value(shard.best_value);
  s.set_numerics(shard.numerics);
  MutexLock lock(&mu_);
  saved_.push_back(std::move(s));
  return absl::OkStatus();
}

void Outbox::NumericsReady(const coordinator::Numerics& numerics) {
  MutexLock lock(&mu_);
  numerics_ = numerics;
}

void Outbox::DrainInto(coordinator::WorkerReport* report) {
  MutexLock lock(&mu_);
  if (numerics_.has_value()) {
    *report->mutable_numerics() = *numerics_;
    numerics_.reset();
  }
  for (metrics::MetricRecord& m : records_) *report->add_metrics() = std::move(m);
  records_.clear();
  for (coordinator::SavedShard& s : saved_) *report->add_saved() = std::move(s);
  saved_.clear();
}

}  // namespace shardline
