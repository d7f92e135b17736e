#include "worker/cli/job_args.h"

#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/job/config.h"
#include "common/platform/status_macros.h"

namespace shardline {

absl::StatusOr<JobArgs> LoadJobArgs(Env* env, const Args& args) {
  if (args.Get("config").empty()) return absl::InvalidArgumentError("--config is required");
  JobArgs job;
  if (args.Has("workers") &&
      (!absl::SimpleAtoi(args.Get("workers"), &job.workers) || job.workers < 1 || job.workers > 4096)) {
    return absl::InvalidArgumentError(absl::StrCat("--workers: '", args.Get("workers"), "' is not between 1 and 4096"));
  }
  // --workers is runtime.num_workers, set before the --set's are checked
  // (collective.islands must divide it), as `launch --workers` does.
  std::vector<std::string> sets;
  if (job.workers > 0) sets.push_back(absl::StrCat("runtime.num_workers=", job.workers));
  for (const std::string& s : args.GetAll("set")) sets.push_back(s);
  ASSIGN_OR_RETURN(job.config, LoadConfig(env, args.Get("config"), sets));
  if (job.workers == 0) job.workers = job.config.runtime().num_workers();
  ASSIGN_OR_RETURN(job.data, LoadTrainingData(env, job.config));
  return job;
}

}  // namespace shardline
