// The coordinator's part of a job's step traces (train.trace_steps): its own
// track of job events (a world formed, a world broke, a checkpoint
// committed, the job ended) and each rank's clock offset, so
// `shardline trace merge` can put every rank on the coordinator's clock.
// Files, in the trace directory beside the workers' rank-<r>.jsonl:
//   coordinator.jsonl     Chrome trace events, one JSON object per line
//   clock_offsets.jsonl   {"generation":G,"rank":R,"offset_us":O}: rank R's
//                         clock minus the coordinator's (the greatest
//                         sent-minus-received of its reports); the last line
//                         per (generation, rank) is the best estimate
//
//   ASSIGN_OR_RETURN(auto trace, TraceLog::Open(env, workdir + "/traces"));
//   every tick: trace->Observe(status, WallNow());
#ifndef SHARDLINE_COORDINATOR_TRACE_LOG_H_
#define SHARDLINE_COORDINATOR_TRACE_LOG_H_

#include <map>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/platform/env.h"
#include "proto/coordinator.pb.h"

namespace shardline {

class TraceLog {
 public:
  static absl::StatusOr<std::unique_ptr<TraceLog>> Open(Env* env, const std::string& dir);
  // Writes what changed since the last call. Not thread-safe.
  absl::Status Observe(const coordinator::JobStatus& status, absl::Time now);

  // An estimate that moved by less than this is not written again.
  static constexpr int64_t kOffsetResolutionMicros = 100;

 private:
  TraceLog(std::unique_ptr<WritableFile> events, std::unique_ptr<WritableFile> offsets)
      : events_(std::move(events)), offsets_(std::move(offsets)) {}
  absl::Status Instant(const std::string& name, absl::Time now, const std::string& args_json);

  std::unique_ptr<WritableFile> events_;
  std::unique_ptr<WritableFile> offsets_;
  coordinator::JobStatus::State state_ = coordinator::JobStatus::STATE_UNSPECIFIED;
  uint64_t generation_ = 0;
  absl::Time generation_start_;
  int64_t checkpoint_ = 0;
  std::map<std::pair<uint64_t, int>, int64_t> written_offsets_;
};

}  // namespace shardline

#endif  // SHARDLINE_COORDINATOR_TRACE_LOG_H_
