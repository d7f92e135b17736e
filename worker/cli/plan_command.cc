// shardline plan: every byte a worker of a job would hold (memory_plan.h),
// before it is started.
#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/platform/args.h"
#include "common/platform/env.h"
#include "common/platform/status_macros.h"
#include "worker/cli/commands.h"
#include "worker/cli/job_args.h"
#include "worker/data/dataset.h"
#include "worker/train/memory_plan.h"

namespace shardline {
namespace {

constexpr char kHelp[] =
    "usage: shardline plan --config FILE [--workers N] [--set a.b=value ...]\n"
    "\n"
    "Prints the memory each worker of the job would hold, term by term: the\n"
    "process's fixed cost, the data, parameters, gradients, optimizer state (ZeRO\n"
    "stage 2 or 3), activations of the largest micro-batch, communication buffers\n"
    "and snapshots (docs/operations.md, \"Memory\"). Loads the data to size it; trains\n"
    "nothing. With runtime.memory_limit_mb set, says whether the job fits it (exit 1\n"
    "if not, naming the largest term and what would fit), as each worker checks\n"
    "before training (also against its memory cgroup's limit).\n"
    "\n"
    "flags:\n"
    "  --workers N   world size (default: the config's runtime.num_workers)\n";

absl::Status Plan(const Args& args) {
  ASSIGN_OR_RETURN(const JobArgs job, LoadJobArgs(Env::Default(), args));
  const config::JobConfig& cfg = job.config;
  const TrainingData& data = job.data;
  ASSIGN_OR_RETURN(const MemoryPlan plan, PlanJob(cfg, data, job.workers));
  std::fputs(PlanTable(plan).c_str(), stdout);
  const int64_t limit_mb = cfg.runtime().memory_limit_mb();
  if (limit_mb <= 0) return absl::OkStatus();
  RETURN_IF_ERROR(CheckPlanFits(plan, cfg, data, limit_mb << 20,
                                absl::StrCat("runtime.memory_limit_mb (", limit_mb, ")")));
  std::printf("fits runtime.memory_limit_mb (%ld MiB)\n", static_cast<long>(limit_mb));
  return absl::OkStatus();
}

}  // namespace

int PlanCommand(int argc, char** argv) {
  Args args;
  absl::Status parsed = ParseArgs(argc, argv, 2, {{"config", "workers"}, {"set"}}, "shardline plan", &args);
  return RunCommand(parsed, args, kHelp, "shardline plan", Plan);
}

}  // namespace shardline
