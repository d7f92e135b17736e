// The coordinator's checkpoint decisions as a pure state machine, beside
// Membership (membership.h): which shards of which save have arrived and
// when a save is whole (commit it), when the same save keeps failing (stop
// the job rather than restart the world without end), and what a
// checkpoint found bad on restore means (fall back to an older one, or stop
// rather than train from scratch over them). No lock, clock, disk or
// logging: Step(book, event) updates the book and returns what the caller
// must do, with the reason in words; Job (job.h) applies the effects
// (commits through the catalog on its writer thread, logs, breaks the world
// or fails the job) and shows the latest reason on the status page.
//
//   BookEffects out = Step(book_, book_event::ShardSaved{rank, shard, world_size});
//   if (out.commit.has_value()) later->commits.push_back(*out.commit);
#ifndef SHARDLINE_COORDINATOR_DECIDE_CHECKPOINT_BOOK_H_
#define SHARDLINE_COORDINATOR_DECIDE_CHECKPOINT_BOOK_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <variant>

#include "absl/status/status.h"
#include "proto/coordinator.pb.h"

namespace shardline {

// Generations in which the same save may fail before the job stops.
inline constexpr int kMaxSaveAttempts = 3;

struct CheckpointBook {
  // step -> rank -> the shard it saved, until every rank of the world has.
  std::map<int64_t, std::map<int, coordinator::SavedShard>> saves;
  // step -> generations in which saving it failed (FailedSaveLimit reads it).
  std::map<int64_t, std::set<uint64_t>> save_failures;
  // Saves and commits that failed (shardline_checkpoint_failures_total).
  int64_t failures = 0;
  // Why the latest decision was made, for the status page ("" before one).
  std::string reason;
};

namespace book_event {
// A rank's shard of a save is on disk (checked by CheckReport).
struct ShardSaved {
  int rank = 0;
  coordinator::SavedShard shard;
  int world_size = 0;  // of the running world
};
// A rank could not write its shard of `step` in `generation`.
struct SaveFailed {
  int64_t step = 0;
  uint64_t generation = 0;
  int rank = 0;
  absl::StatusCode code = absl::StatusCode::kUnknown;  // WorkerReport.save_failure_code
  std::string failure;                                 // its message
  std::string kept_dir;  // the newest committed checkpoint, "" if none
  std::string root;      // the checkpoint directory
};
// The catalog could not commit a whole save.
struct CommitFailed {
  int64_t step = 0;
  std::string why;
};
// A rank found the checkpoint it restored from bad. The caller has marked
// it in the catalog: `first` says whether this report was the first to,
// and `fallback_step` / `fallback_dir` are where the next world restores
// from now ("" dir: nothing left).
struct BadCheckpoint {
  int64_t step = 0;
  int rank = 0;
  std::string why;
  bool first = false;
  int64_t fallback_step = 0;
  std::string fallback_dir;
  std::string root;
};
// The world broke: a partial save of it is never committed.
struct WorldBroken {};
}  // namespace book_event

using BookEvent = std::variant<book_event::ShardSaved, book_event::SaveFailed, book_event::CommitFailed,
                               book_event::BadCheckpoint, book_event::WorldBroken>;

// A whole save to commit: every rank's shard of `step` in a world of `world`.
struct BookCommit {
  int64_t step = 0;
  int world = 0;
  std::map<int, coordinator::SavedShard> shards;
};

struct BookEffects {
  std::optional<BookCommit> commit;
  // Persist the mark of a bad checkpoint (catalog, off the lock).
  struct MarkBad {
    int64_t step = 0;
    std::string why;
  };
  std::optional<MarkBad> mark_bad;
  // Break the running world (it restored from a bad checkpoint), saying why.
  std::optional<std::string> break_world;
  // Stop the job with this status.
  std::optional<absl::Status> fail;
  // Why, in words, kept in book.reason; the caller logs it when `error`
  // (unless `fail` says it). "" for a shard that is not the last of its
  // save.
  std::string reason;
  bool error = false;
};

// Updates `book` for `event`; pure.
BookEffects Step(CheckpointBook& book, const BookEvent& event);

}  // namespace shardline

#endif  // SHARDLINE_COORDINATOR_DECIDE_CHECKPOINT_BOOK_H_
