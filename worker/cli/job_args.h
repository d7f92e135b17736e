// What `shardline plan` and `shardline numerics` read alike: --config with
// its --set overrides, --workers (runtime.num_workers, set before the
// overrides are checked, as `launch --workers` does), and the job's data,
// loaded to size what they print.
#ifndef SHARDLINE_WORKER_CLI_JOB_ARGS_H_
#define SHARDLINE_WORKER_CLI_JOB_ARGS_H_

#include "absl/status/statusor.h"
#include "common/platform/args.h"
#include "common/platform/env.h"
#include "proto/config.pb.h"
#include "worker/data/dataset.h"

namespace shardline {

struct JobArgs {
  config::JobConfig config;
  int workers = 0;  // --workers, else the config's runtime.num_workers
  TrainingData data;
};

// INVALID_ARGUMENT naming the flag when --config is missing or --workers is
// not in [1, 4096]; the config's and the data's own errors otherwise.
absl::StatusOr<JobArgs> LoadJobArgs(Env* env, const Args& args);

}  // namespace shardline

#endif  // SHARDLINE_WORKER_CLI_JOB_ARGS_H_
