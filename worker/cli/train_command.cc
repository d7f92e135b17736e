#include <algorithm>
#include <cstdio>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "common/platform/args.h"
#include "common/checkpoint/checkpoint_dir.h"
#include "common/checkpoint/verify.h"
#include "common/job/config.h"
#include "common/platform/env.h"
#include "common/platform/logging.h"
#include "common/observability/metrics_writer.h"
#include "common/platform/status_macros.h"
#include "common/platform/workdir_lock.h"
#include "worker/cli/commands.h"
#include "worker/data/dataset.h"
#include "worker/data/inflate_cache.h"
#include "worker/model/gemm.h"
#include "worker/train/progress.h"
#include "worker/train/train_loop.h"

namespace shardline {
namespace {

constexpr char kHelp[] =
    "usage: shardline train --config FILE --workdir DIR [--set a.b.c=value ...]\n"
    "\n"
    "Trains in this process (a world of one: no coordinator, no network).\n"
    "\n"
    "  --config FILE   job config in protobuf text format (proto/config.proto),\n"
    "                  e.g. deploy/configs/fmnist_mlp.textproto\n"
    "  --workdir DIR   where metrics.jsonl, config.textproto and checkpoints/ are\n"
    "                  written; created if missing. metrics.jsonl is appended to.\n"
    "                  A workdir with a committed checkpoint resumes from it;\n"
    "                  DIR/job_id names the job its checkpoints belong to.\n"
    "  --set a.b=v     override a config field; repeatable, applied in order.\n"
    "                  Lists: --set model.mlp.hidden_sizes=512,256\n"
    "                  Messages: --set optimizer.adamw={}\n";

// The newest of `steps` (committed checkpoints under `root`, oldest first)
// whose checkpoint verifies, as the coordinator's fallback does for launch:
// a damaged one is skipped, saying why. Fails, rather than starting from
// scratch over them, when none verifies.
absl::StatusOr<std::string> NewestThatVerifies(Env* env, const std::string& root, const std::vector<int64_t>& steps) {
  std::string first_error;
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    const std::string dir = StepDir(root, *it);
    const absl::StatusOr<VerifiedCheckpoint> v = VerifyCheckpoint(env, dir, VerifyOptions());
    if (v.ok()) return dir;
    if (!absl::IsDataLoss(v.status())) return v.status();  // not damage: e.g. unreadable directory
    if (first_error.empty()) first_error = std::string(v.status().message());
    // Set aside: never tried, listed as committed or counted by retention
    // again.
    RETURN_IF_ERROR(QuarantineCheckpoint(env, root, *it, std::string(v.status().message())));
    SLOG(ERROR) << "checkpoint at step " << *it << " failed verification: " << v.status().message()
                << (std::next(it) != steps.rend() ? absl::StrCat("; falling back to step ", *std::next(it))
                                                  : std::string());
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "no checkpoint in ", root, " can be restored (the newest: ", first_error,
      "); not training from scratch over them. Move ", root, " aside to start anew, or set checkpoint.init_from"));
}

// The job id of a `shardline train` workdir, in <workdir>/job_id: made on
// the first run, before any checkpoint, and kept, so the workdir's
// checkpoints can be told from another job's copied in.
absl::StatusOr<std::string> LoadOrCreateJobId(Env* env, const std::string& workdir) {
  const std::string path = workdir + "/job_id";
  if (env->FileExists(path)) {
    ASSIGN_OR_RETURN(std::string id, env->ReadFile(path, kMaxSmallFileBytes));
    id = std::string(absl::StripAsciiWhitespace(id));
    if (id.empty()) return absl::DataLossError(absl::StrCat(path, " is empty"));
    return id;
  }
  const std::string id = NewJobId();
  RETURN_IF_ERROR(WriteFileAtomically(env, path, id + "\n", /*durable=*/true));
  return id;
}

absl::Status Train(const Args& args) {
  Env* env = Env::Default();
  if (args.Get("config").empty()) return absl::InvalidArgumentError("--config is required");
  if (args.Get("workdir").empty()) return absl::InvalidArgumentError("--workdir is required");
  const std::string workdir = args.Get("workdir");
  ASSIGN_OR_RETURN(config::JobConfig cfg, LoadConfig(env, args.Get("config"), args.GetAll("set")));
  if (cfg.runtime().num_workers() != 1) {
    SLOG(WARNING) << "runtime.num_workers is " << cfg.runtime().num_workers()
                  << "; 'shardline train' runs a world of one and ignores it";
    cfg.mutable_runtime()->set_num_workers(1);
  }
  // One owner per workdir, taken before anything in it changes.
  ASSIGN_OR_RETURN(const std::unique_ptr<WorkdirLock> lock, WorkdirLock::Acquire(env, workdir, "shardline train"));
  RETURN_IF_ERROR(Annotate(env->CreateDirs(workdir), "creating --workdir"));
  // Found now, not at the first save after minutes of training.
  RETURN_IF_ERROR(CheckWritableDir(env, CheckpointRoot(workdir)));
  RETURN_IF_ERROR(WriteFileAtomically(env, workdir + "/config.textproto", ConfigToText(cfg)));
  SetBlasThreads(cfg.runtime().blas_threads());
  SLOG(INFO) << "OpenBLAS " << BlasCoreName() << " kernels; loading "
             << (cfg.data().has_tokens() ? cfg.data().tokens().dir()
                 : cfg.data().has_text() ? cfg.data().text().train_path()
                                         : cfg.data().dir());
  ASSIGN_OR_RETURN(TrainingData data, LoadTrainingData(env, cfg));
  ASSIGN_OR_RETURN(auto metrics, MetricsWriter::Open(env, workdir + "/metrics.jsonl"));

  // Resume order: this workdir's newest committed checkpoint that verifies
  // (an error if it has some and none does), then
  // checkpoint.resume_from (another workdir, at resume_step or its latest).
  const std::string root = CheckpointRoot(workdir);
  ASSIGN_OR_RETURN(const std::vector<int64_t> removed, DeleteUncommitted(env, root));
  if (!removed.empty()) SLOG(INFO) << DescribeUncommittedRemoved(root, removed);
  ASSIGN_OR_RETURN(std::vector<int64_t> mine, CommittedSteps(env, root));
  ASSIGN_OR_RETURN(const std::string job_id, LoadOrCreateJobId(env, workdir));
  RETURN_IF_ERROR(CheckCheckpointsBelongTo(env, root, mine, job_id));
  std::string restore;
  if (!mine.empty()) {
    ASSIGN_OR_RETURN(restore, NewestThatVerifies(env, root, mine));
  } else if (!cfg.checkpoint().resume_from().empty()) {
    const std::string other = CheckpointRoot(cfg.checkpoint().resume_from());
    ASSIGN_OR_RETURN(std::vector<int64_t> theirs, CommittedSteps(env, other));
    const int64_t want = cfg.checkpoint().resume_step();
    if (want >= 0 && std::find(theirs.begin(), theirs.end(), want) == theirs.end()) {
      return absl::NotFoundError(absl::StrCat("config field checkpoint.resume_step: no committed checkpoint at step ",
                                              want, " in ", other));
    }
    if (theirs.empty()) {
      return absl::NotFoundError(absl::StrCat("config field checkpoint.resume_from: no committed checkpoint in ", other));
    }
    restore = StepDir(other, want >= 0 ? want : theirs.back());
  }
  LocalCommitter committer(env, root, cfg.checkpoint(), job_id);
  // Retention never deletes the checkpoint this run restored from.
  if (int64_t step = 0; !restore.empty() && absl::StartsWith(restore, root + "/") &&
                        ParseStepDirName(restore.substr(root.size() + 1), &step)) {
    committer.Pin(step);
  }

  LocalCollectives comm;
  TrainOptions options;
  options.env = env;
  options.metrics = metrics.get();
  options.checkpoint_root = root;
  options.checkpoint_sink = &committer;
  options.job_id = job_id;
  options.restore_dir = restore;
  ASSIGN_OR_RETURN(TrainResult r, RunTraining(cfg, data, comm, options));

  const EvalPoint& final_eval = r.evals.back();
  SLOG(INFO) << absl::StrFormat(
      "done: %d steps in %s (%.1f s training, %.3f s lost to checkpoints), %.0f samples/s; %s, loss %.4f; "
      "metrics in %s/metrics.jsonl; per step: %s; %s",
      r.steps, FormatDuration(r.train_seconds), r.train_seconds, r.checkpoint_seconds, r.samples_per_second,
      DescribeFinalEval(final_eval), final_eval.loss, workdir, PhasesPerStep(r.phase_seconds, r.steps - r.start_step),
      DescribeHeld(r));
  return absl::OkStatus();
}

}  // namespace

int TrainCommand(int argc, char** argv) {
  Args args;
  absl::Status parsed = ParseArgs(argc, argv, 2, {{"config", "workdir"}, {"set"}}, "shardline train", &args);
  return RunCommand(parsed, args, kHelp, "shardline train", Train);
}

}  // namespace shardline
