#include "common/checkpoint/checkpoint_dir.h"

#include <algorithm>
#include <random>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/platform/status_macros.h"
#include "google/protobuf/text_format.h"

namespace shardline {
namespace {

}  // namespace

bool ParseStepDirName(const std::string& name, int64_t* step) {
  return absl::StartsWith(name, "step_") && name.size() == 17 && absl::SimpleAtoi(name.substr(5), step);
}

std::string StepDirName(int64_t step) { return absl::StrFormat("step_%012d", step); }

std::string StepDir(const std::string& root, int64_t step) { return root + "/" + StepDirName(step); }

absl::Status WriteCommitted(Env* env, const std::string& step_dir, const state::CheckpointManifest& manifest) {
  std::string text;
  google::protobuf::TextFormat::PrintToString(manifest, &text);
  return Annotate(WriteFileAtomically(env, step_dir + "/" + kCommittedFile, text, /*durable=*/true),
                  "committing checkpoint");
}

absl::StatusOr<state::CheckpointManifest> ReadCommitted(Env* env, const std::string& step_dir) {
  const std::string path = step_dir + "/" + kCommittedFile;
  ASSIGN_OR_RETURN(std::string text, env->ReadFile(path, kMaxSmallFileBytes));
  state::CheckpointManifest m;
  if (!google::protobuf::TextFormat::ParseFromString(text, &m)) {
    return absl::DataLossError(absl::StrCat(path, ": manifest does not parse"));
  }
  return m;
}

absl::Status WriteBest(Env* env, const std::string& root, int64_t step, double value) {
  return WriteFileAtomically(env, root + "/" + kBestFile, absl::StrFormat("%d %.9g\n", step, value), /*durable=*/true);
}

std::string CheckpointRoot(const std::string& workdir) { return workdir + "/checkpoints"; }

BestRecord ReadBest(Env* env, const std::string& root) {
  BestRecord best;
  absl::StatusOr<std::string> text = env->ReadFile(root + "/" + kBestFile, kMaxSmallFileBytes);
  if (!text.ok()) return best;
  const std::string line = text->substr(0, text->find('\n'));
  const size_t space = line.find(' ');
  int64_t step;
  if (space == std::string::npos || !absl::SimpleAtoi(line.substr(0, space), &step)) return best;
  best.step = step;
  best.value_text = line.substr(space + 1);
  return best;
}

bool IsCommitted(Env* env, const std::string& step_dir) { return env->FileExists(step_dir + "/" + kCommittedFile); }

absl::StatusOr<std::vector<int64_t>> CommittedSteps(Env* env, const std::string& root) {
  std::vector<int64_t> steps;
  if (!env->IsDirectory(root)) return steps;
  ASSIGN_OR_RETURN(std::vector<std::string> names, env->GetChildren(root));
  for (const std::string& n : names) {
    int64_t step;
    if (ParseStepDirName(n, &step) && IsCommitted(env, root + "/" + n)) steps.push_back(step);
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

std::string NewJobId() {
  std::random_device rd;
  return absl::StrFormat("%08x%08x", rd(), rd());
}

absl::Status CheckCheckpointsBelongTo(Env* env, const std::string& root, const std::vector<int64_t>& steps,
                                      const std::string& job_id) {
  for (int64_t step : steps) {
    const std::string dir = StepDir(root, step);
    const absl::StatusOr<state::CheckpointManifest> m = ReadCommitted(env, dir);
    if (!m.ok() || m->job_id() == job_id) continue;
    return absl::FailedPreconditionError(absl::StrCat(
        dir, " is a checkpoint of job ", m->job_id().empty() ? "(unnamed)" : m->job_id(), ", not of this job (",
        job_id, "); a workdir's checkpoints/ holds its own job's only. Move it out; to start from it, put it in "
        "another workdir's checkpoints/ and set checkpoint.resume_from to that workdir"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int64_t>> DeleteUncommitted(Env* env, const std::string& root, int64_t below) {
  std::vector<int64_t> deleted;
  if (!env->IsDirectory(root)) return deleted;
  ASSIGN_OR_RETURN(std::vector<std::string> names, env->GetChildren(root));
  std::sort(names.begin(), names.end());
  for (const std::string& n : names) {
    int64_t step;
    if (!ParseStepDirName(n, &step) || step >= below) continue;
    if (IsCommitted(env, root + "/" + n)) continue;
    RETURN_IF_ERROR(env->DeleteRecursively(root + "/" + n));
    deleted.push_back(step);
  }
  return deleted;
}

std::string DescribeUncommittedRemoved(const std::string& root, const std::vector<int64_t>& steps) {
  if (steps.empty()) return "";
  std::string names;
  for (int64_t s : steps) absl::StrAppend(&names, names.empty() ? "" : ", ", StepDirName(s));
  return absl::StrCat("removed ", steps.size(), " uncommitted step director", steps.size() == 1 ? "y" : "ies",
                      " under ", root, " (saves that never committed; every committed one is kept): ", names);
}

absl::StatusOr<std::vector<int64_t>> ApplyRetention(Env* env, const std::string& root,
                                                    const config::CheckpointConfig& policy,
                                                    const std::vector<int64_t>& also_keep) {
  ASSIGN_OR_RETURN(std::vector<int64_t> steps, CommittedSteps(env, root));
  std::vector<int64_t> deleted;
  const size_t keep_last = static_cast<size_t>(policy.keep_last());
  for (size_t i = 0; i < steps.size(); ++i) {
    const int64_t s = steps[i];
    const bool recent = keep_last == 0 || i + keep_last >= steps.size();
    const bool permanent = policy.keep_every() > 0 && s % policy.keep_every() == 0;
    const bool pinned = std::find(also_keep.begin(), also_keep.end(), s) != also_keep.end();
    if (recent || permanent || pinned) continue;
    // Remove the commit mark first: a crash mid-delete leaves an uncommitted
    // directory, which is never restored and is cleaned up later.
    RETURN_IF_ERROR(env->DeleteFile(StepDir(root, s) + "/" + kCommittedFile));
    RETURN_IF_ERROR(env->DeleteRecursively(StepDir(root, s)));
    deleted.push_back(s);
  }
  return deleted;
}

absl::StatusOr<std::vector<int64_t>> FinishCommit(Env* env, const std::string& root,
                                                  const config::CheckpointConfig& policy, int64_t step,
                                                  std::optional<double> new_best, const std::vector<int64_t>& pinned) {
  if (new_best.has_value()) RETURN_IF_ERROR(WriteBest(env, root, step, *new_best));
  const int64_t best = ReadBestStep(env, root);
  std::vector<int64_t> keep = pinned;
  if (best >= 0) keep.push_back(best);
  ASSIGN_OR_RETURN(std::vector<int64_t> deleted, ApplyRetention(env, root, policy, keep));
  RETURN_IF_ERROR(DeleteUncommitted(env, root, step).status());
  return deleted;
}

absl::Status QuarantineCheckpoint(Env* env, const std::string& root, int64_t step, const std::string& reason) {
  const std::string dir = StepDir(root, step);
  if (!env->IsDirectory(dir)) return absl::OkStatus();
  const std::string aside = root + "/" + kQuarantineDir;
  RETURN_IF_ERROR(env->CreateDirs(aside));
  const std::string to = aside + "/" + StepDirName(step);
  RETURN_IF_ERROR(env->DeleteRecursively(to));
  RETURN_IF_ERROR(WriteFileAtomically(env, dir + "/" + kBadFile, reason + "\n"));
  RETURN_IF_ERROR(env->RenameFile(dir, to));
  return env->SyncDir(root);
}

absl::StatusOr<std::vector<std::pair<int64_t, std::string>>> QuarantinedSteps(Env* env, const std::string& root) {
  std::vector<std::pair<int64_t, std::string>> out;
  const std::string aside = root + "/" + kQuarantineDir;
  if (!env->IsDirectory(aside)) return out;
  ASSIGN_OR_RETURN(std::vector<std::string> names, env->GetChildren(aside));
  for (const std::string& n : names) {
    int64_t step;
    if (!ParseStepDirName(n, &step)) continue;
    absl::StatusOr<std::string> why = env->ReadFile(aside + "/" + n + "/" + kBadFile, kMaxSmallFileBytes);
    out.emplace_back(step, why.ok() ? std::string(absl::StripTrailingAsciiWhitespace(*why)) : std::string("?"));
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace shardline
