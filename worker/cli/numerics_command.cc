// shardline numerics: this host's numerics fingerprint for a job (the
// canary a worker reports at the door: worker/train/numerics.h), to compare
// hosts before a job starts.
#include <cstdio>
#include <string>

#include "common/platform/args.h"
#include "common/platform/env.h"
#include "common/platform/status_macros.h"
#include "worker/cli/commands.h"
#include "worker/cli/job_args.h"
#include "worker/data/dataset.h"
#include "worker/model/gemm.h"
#include "worker/train/numerics.h"
#include "worker/train/run_sizes.h"

namespace shardline {
namespace {

constexpr char kHelp[] =
    "usage: shardline numerics --config FILE [--workers N] [--set a.b=value ...]\n"
    "\n"
    "Prints the numerics fingerprint a worker of the job would report on this host,\n"
    "and the kernels it computes with: a canary of the job's model (a transformer cut\n"
    "to one block) at its shapes and precision, forward and backward on fixed inputs,\n"
    "and one optimizer update. Hosts that print the same fingerprint give the same\n"
    "bits; the coordinator refuses a worker whose fingerprint is not the job's\n"
    "(runtime.numerics STRICT; docs/operations.md, \"Failure modes\"). Loads the data to\n"
    "size the canary; trains nothing.\n"
    "\n"
    "flags:\n"
    "  --workers N   world size (default: the config's runtime.num_workers)\n";

absl::Status Numerics(const Args& args) {
  ASSIGN_OR_RETURN(const JobArgs job, LoadJobArgs(Env::Default(), args));
  SetBlasThreads(job.config.runtime().blas_threads());  // as a worker runs the job
  ASSIGN_OR_RETURN(const NumericsFingerprint n, ComputeNumerics(job.config, InputOf(job.data.train)));
  std::printf("fingerprint 0x%016lx\nkernels %s\n", static_cast<unsigned long>(n.fingerprint), n.kernels.c_str());
  return absl::OkStatus();
}

}  // namespace

int NumericsCommand(int argc, char** argv) {
  Args args;
  absl::Status parsed = ParseArgs(argc, argv, 2, {{"config", "workers"}, {"set"}}, "shardline numerics", &args);
  return RunCommand(parsed, args, kHelp, "shardline numerics", Numerics);
}

}  // namespace shardline
