// The memory plan: every byte a worker will hold, by what for, computed from
// the config, the model's shapes and the data before training (issue 48;
// docs/operations.md, "Memory"). Printed by `shardline plan`, checked
// against `runtime.memory_limit_mb` or the worker's memory cgroup before a
// job trains (a job that does not fit is refused naming the largest term),
// and compared with the measured peak in each worker's final log line.
//
// A pure function: the same inputs give the same plan. Terms, per worker
// (the rank that owns the most; P parameters, N workers, "own" = P/N):
//   fixed          the process before any model: binary, libraries, gRPC,
//                  metrics, BLAS threads (measured: kFixedBytes)
//   data           the splits as loaded (pixels as bytes, text as bytes,
//                  labels) and one epoch's permutation
//   parameters     stage 2: 4P; stage 3: own pieces + the buckets whole at
//                  once (the layer in use, prefetch_buckets ahead, a tied
//                  layer read again)
//   gradients      stage 2 (or grad_accum_steps > 1): 4P; stage 3: own
//                  pieces + the buckets not yet reduced
//   optimizer      own x (AdamW: 2, SGD: 1) floats
//   activations    the model's workspace at the largest micro-batch
//                  (Model::WorkspaceBytes); evaluation runs in it
//   communication  the ring's messages in flight: two chunks of the largest
//                  bucket per collective under way
//   snapshots      in-memory snapshots: two steps of memory_copies
//                  serialised shards, and four more while one is taken
//                  (its own, the one passed on, the one received, gRPC's
//                  copy); an async save's copy of the shard, if the job
//                  saves (a synchronous save writes from the live state)
#ifndef SHARDLINE_WORKER_TRAIN_MEMORY_PLAN_H_
#define SHARDLINE_WORKER_TRAIN_MEMORY_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/job/islands.h"
#include "common/job/shard.h"
#include "proto/config.pb.h"
#include "worker/data/dataset.h"
#include "worker/model/model.h"

namespace shardline {

// What a worker process holds before any model or data (measured; see
// docs/operations.md "Memory" for how).
inline constexpr int64_t kFixedBytes = int64_t{40} << 20;

struct MemoryTerm {
  std::string name;  // "parameters", "activations", ...
  int64_t bytes = 0;
};

struct MemoryPlan {
  int world = 1;
  int zero_stage = 2;
  int micro_batch = 0;
  int64_t parameters = 0;  // P
  std::vector<MemoryTerm> terms;
  int64_t total() const;
  const MemoryTerm& largest() const;  // of the terms that grow with the model (not fixed)
};

// The plan of one worker of a world of `islands` (its shape in this
// generation: ShapeIslands) training `config` on `data`, with `model` made
// from the config, cut into `buckets` (GradientBuckets). With outer steps
// over K islands a worker shares its island's world / K: it owns
// 1/(world / K) of the state, which holds the outer parameters and momentum
// too, and an outer step holds its pseudo-gradient.
MemoryPlan PlanMemory(const config::JobConfig& config, const Model& model, const std::vector<Range>& buckets,
                      const TrainingData& data, const IslandShape& islands);
// The same, making the model and buckets from the config (errors are the
// config's).
absl::StatusOr<MemoryPlan> PlanJob(const config::JobConfig& config, const TrainingData& data, int world);

// "parameters 12.3 MiB, gradients ...; total 456.7 MiB".
std::string DescribePlan(const MemoryPlan& plan);
// The plan as a table, one term a line, for `shardline plan`.
std::string PlanTable(const MemoryPlan& plan);

// Whether a plan's total fits `limit_bytes` less `margin_percent` of it
// (runtime.memory_margin_percent: measured peaks run up to ~5% over the
// plan - the allocator's retained blocks, the libraries' pages; bench/
// RESULTS.md, issue 48 - and a cgroup also charges the page cache).
bool PlanFits(int64_t total, int64_t limit_bytes, int margin_percent);

// OK when the plan's total fits `limit_bytes` less config's
// runtime.memory_margin_percent of it (`limit_bytes` the tighter of
// runtime.memory_limit_mb and the cgroup's, named by `limit_source`);
// otherwise FailedPrecondition naming the total, the limit and its source,
// the largest term, and what would fit it (stage 3, remat, more workers, a
// smaller batch).
// `plan` is PlanJob(config, data, world)'s; the alternatives are planned
// here.
absl::Status CheckPlanFits(const MemoryPlan& plan, const config::JobConfig& config, const TrainingData& data,
                           int64_t limit_bytes, const std::string& limit_source);

}  // namespace shardline

#endif  // SHARDLINE_WORKER_TRAIN_MEMORY_PLAN_H_
