#include "coordinator/decide/checkpoint_book.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "coordinator/decide/restore_plan.h"

namespace shardline {
namespace {

namespace ev = book_event;

void On(CheckpointBook& book, BookEffects& out, const ev::ShardSaved& e) {
  std::map<int, coordinator::SavedShard>& shards = book.saves[e.shard.step()];
  shards[e.rank] = e.shard;
  if (static_cast<int>(shards.size()) < e.world_size) return;
  out.commit = BookCommit{e.shard.step(), e.world_size, std::move(shards)};
  book.saves.erase(e.shard.step());
  out.reason = absl::StrCat("every shard of step ", e.shard.step(), " is saved (", e.world_size, " ranks): committing");
}

void On(CheckpointBook& book, BookEffects& out, const ev::SaveFailed& e) {
  ++book.failures;
  std::set<uint64_t>& generations = book.save_failures[e.step];
  generations.insert(e.generation);
  const int attempts = static_cast<int>(generations.size());
  out.error = true;
  if (attempts < kMaxSaveAttempts) {
    out.reason = absl::StrCat("saving the checkpoint at step ", e.step, " failed on rank ", e.rank, " (", e.failure,
                              "); attempt ", attempts, " of ", kMaxSaveAttempts,
                              ", the world restarts from the last committed checkpoint");
    return;
  }
  // The same save failing again and again (a full or broken disk) would
  // restart the world forever: stop, keeping what was committed.
  SaveGiveUp give_up;
  give_up.step = e.step;
  give_up.attempts = attempts;
  give_up.rank = e.rank;
  give_up.code = e.code;
  give_up.failure = e.failure;
  give_up.kept_dir = e.kept_dir;
  give_up.root = e.root;
  out.fail = SaveGiveUpStatus(give_up);
  out.reason = std::string(out.fail->message());
}

void On(CheckpointBook& book, BookEffects& out, const ev::CommitFailed& e) {
  ++book.failures;
  out.error = true;
  out.reason = absl::StrCat("checkpoint at step ", e.step, " not committed: ", e.why);
}

void On(CheckpointBook&, BookEffects& out, const ev::BadCheckpoint& e) {
  if (!e.first) return;  // another rank's report of the same step
  out.mark_bad = BookEffects::MarkBad{e.step, e.why};
  out.error = true;
  if (e.fallback_dir.empty()) {
    // Checkpoints existed and none is usable: starting from scratch would
    // silently throw the run away (and overwrite them in time).
    out.fail = absl::FailedPreconditionError(absl::StrCat(
        "no checkpoint of this job can be restored: the last one tried, step ", e.step, ", failed verification on "
        "rank ", e.rank, " (", e.why, "), and every newer one was marked bad before it; not training from scratch "
        "over them. Move ", e.root, " aside to start anew, or set checkpoint.init_from"));
    out.reason = std::string(out.fail->message());
    return;
  }
  out.break_world = absl::StrCat("its checkpoint at step ", e.step, " is bad");
  out.reason = absl::StrCat("checkpoint at step ", e.step, " failed verification on rank ", e.rank, ": ", e.why,
                            "; marked bad, falling back to step ", e.fallback_step);
}

void On(CheckpointBook& book, BookEffects&, const ev::WorldBroken&) { book.saves.clear(); }

}  // namespace

BookEffects Step(CheckpointBook& book, const BookEvent& event) {
  BookEffects out;
  std::visit([&](const auto& e) { On(book, out, e); }, event);
  if (!out.reason.empty()) book.reason = out.reason;
  return out;
}

}  // namespace shardline
