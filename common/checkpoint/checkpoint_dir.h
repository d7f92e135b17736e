// The checkpoint directory tree (docs/checkpoint_format.md): step
// directories, the COMMITTED manifest, finding the latest committed step,
// retention and cleanup. Used by the coordinator (which commits) and by the
// single-process trainer (a world of one commits its own shard).
//
//   const std::string dir = StepDir(root, 1200);          // root/step_000000001200
//   RETURN_IF_ERROR(WriteCommitted(env, dir, manifest));  // durable
//   ASSIGN_OR_RETURN(std::vector<int64_t> steps, CommittedSteps(env, root));
#ifndef SHARDLINE_COMMON_CHECKPOINT_CHECKPOINT_DIR_H_
#define SHARDLINE_COMMON_CHECKPOINT_CHECKPOINT_DIR_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/platform/env.h"
#include "proto/config.pb.h"
#include "proto/train_state.pb.h"

namespace shardline {

inline constexpr char kCommittedFile[] = "COMMITTED";
inline constexpr char kBestFile[] = "BEST";  // root/BEST: "<step> <value>"

// A workdir's checkpoint root: WORKDIR/checkpoints (every process and
// command spells it here).
std::string CheckpointRoot(const std::string& workdir);

// The best checkpoint recorded in root/BEST (durably, by WriteBest).
struct BestRecord {
  int64_t step = -1;       // -1: no BEST, or one that does not parse
  std::string value_text;  // the metric's value as written
};
absl::Status WriteBest(Env* env, const std::string& root, int64_t step, double value);
BestRecord ReadBest(Env* env, const std::string& root);
inline int64_t ReadBestStep(Env* env, const std::string& root) { return ReadBest(env, root).step; }

// "step_000000001200": zero-padded so names sort by step.
std::string StepDirName(int64_t step);
std::string StepDir(const std::string& root, int64_t step);
// The step of a StepDirName; false for any other name.
bool ParseStepDirName(const std::string& name, int64_t* step);

// Writes dir/COMMITTED (text format) durably: temp file, fsync, rename,
// fsync dir.
absl::Status WriteCommitted(Env* env, const std::string& step_dir, const state::CheckpointManifest& manifest);
absl::StatusOr<state::CheckpointManifest> ReadCommitted(Env* env, const std::string& step_dir);

// True while `step_dir` holds its COMMITTED file (retention deletes it
// before the step's shards, and a save writes it last).
bool IsCommitted(Env* env, const std::string& step_dir);

// Steps with a COMMITTED file under root, ascending. Empty if root is missing.
absl::StatusOr<std::vector<int64_t>> CommittedSteps(Env* env, const std::string& root);

// A new job id: 16 random hex digits (std::random_device). The coordinator
// keeps its job's in RocksDB, `shardline train` in <workdir>/job_id.
std::string NewJobId();

// Checkpoints belong to their job: kFailedPrecondition if the COMMITTED
// manifest of any of `steps` under root names a job other than `job_id`,
// saying whose it is. A manifest that cannot be read is left to restore's
// verification (which marks it bad).
absl::Status CheckCheckpointsBelongTo(Env* env, const std::string& root, const std::vector<int64_t>& steps,
                                      const std::string& job_id);

// Deletes step directories below `below` that have no COMMITTED file
// (partial saves, and directories a failed save left empty). Later ones may
// be saves in progress and are left alone. Returns the steps deleted,
// ascending, for the caller to say so.
absl::StatusOr<std::vector<int64_t>> DeleteUncommitted(Env* env, const std::string& root, int64_t below = INT64_MAX);

// "removed 2 uncommitted step directories under ROOT (saves that never
// committed): step_...600, step_...800", or "" for none.
std::string DescribeUncommittedRemoved(const std::string& root, const std::vector<int64_t>& steps);

// Applies the policy to the committed steps: keeps the newest keep_last
// (0: all), every step that is a multiple of keep_every, and `also_keep`
// (e.g. the best); deletes the other directories. Returns the deleted steps.
absl::StatusOr<std::vector<int64_t>> ApplyRetention(Env* env, const std::string& root,
                                                    const config::CheckpointConfig& policy,
                                                    const std::vector<int64_t>& also_keep = {});

// The steps after `step`'s COMMITTED file is durable, shared by every
// committer: records `step` in root/BEST with the metric's value if it is
// a new best (`new_best` holds the value), applies the policy
// (never deleting the step BEST names, nor those in `pinned`: the one the
// job restored from), and deletes uncommitted directories below `step`.
// Returns the steps retention deleted.
absl::StatusOr<std::vector<int64_t>> FinishCommit(Env* env, const std::string& root,
                                                  const config::CheckpointConfig& policy, int64_t step,
                                                  std::optional<double> new_best,
                                                  const std::vector<int64_t>& pinned = {});

// Where checkpoints found bad are kept aside: root/quarantine/step_N, each
// with a BAD file saying why. Never restored, listed or counted by
// retention; kept for a person to look at (delete them by hand).
inline constexpr char kQuarantineDir[] = "quarantine";
inline constexpr char kBadFile[] = "BAD";

// Moves `step`'s directory under root/quarantine (replacing an older
// quarantined copy of that step) with a BAD file holding `reason`. OK if the
// directory is already gone.
absl::Status QuarantineCheckpoint(Env* env, const std::string& root, int64_t step, const std::string& reason);

// The quarantined steps under root, ascending, and why each was set aside.
absl::StatusOr<std::vector<std::pair<int64_t, std::string>>> QuarantinedSteps(Env* env, const std::string& root);

}  // namespace shardline

#endif  // SHARDLINE_COMMON_CHECKPOINT_CHECKPOINT_DIR_H_
