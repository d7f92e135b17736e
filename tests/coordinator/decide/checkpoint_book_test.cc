// The checkpoint book alone: no threads, gRPC, clock or disk. Each case
// builds a book, steps it, and checks the effects and the reason kept.
#include "coordinator/decide/checkpoint_book.h"

#include <gtest/gtest.h>

#include "absl/strings/match.h"

namespace shardline {
namespace {

namespace ev = book_event;

coordinator::SavedShard Shard(int64_t step) {
  coordinator::SavedShard s;
  s.set_step(step);
  return s;
}

TEST(CheckpointBookTest, ASaveIsCommittedOnceEveryRankOfTheWorldSavedIt) {
  CheckpointBook book;
  EXPECT_FALSE(Step(book, ev::ShardSaved{0, Shard(400), 3}).commit.has_value());
  EXPECT_FALSE(Step(book, ev::ShardSaved{2, Shard(400), 3}).commit.has_value());
  EXPECT_FALSE(Step(book, ev::ShardSaved{2, Shard(400), 3}).commit.has_value()) << "the same rank twice is one";
  EXPECT_FALSE(Step(book, ev::ShardSaved{0, Shard(600), 3}).commit.has_value()) << "another step";
  const BookEffects out = Step(book, ev::ShardSaved{1, Shard(400), 3});
  ASSERT_TRUE(out.commit.has_value());
  EXPECT_EQ(out.commit->step, 400);
  EXPECT_EQ(out.commit->world, 3);
  EXPECT_EQ(out.commit->shards.size(), 3u);
  EXPECT_FALSE(out.error);
  EXPECT_TRUE(absl::StrContains(book.reason, "every shard of step 400 is saved")) << book.reason;
  EXPECT_EQ(book.saves.count(400), 0u);
  EXPECT_EQ(book.saves.count(600), 1u);
  // A broken world's partial save is dropped, never committed.
  Step(book, ev::WorldBroken{});
  EXPECT_TRUE(book.saves.empty());
  EXPECT_FALSE(Step(book, ev::ShardSaved{1, Shard(600), 3}).commit.has_value());
}

// The same save failing in generation after generation (a full disk) stops
// the job at the third, keeping the reason; the verdict follows the code.
TEST(CheckpointBookTest, ASaveThatKeepsFailingStopsTheJobAtTheThirdGeneration) {
  CheckpointBook book;
  ev::SaveFailed e;
  e.step = 600;
  e.rank = 1;
  e.code = absl::StatusCode::kResourceExhausted;
  e.failure = "write .../shard: No space left on device";
  e.kept_dir = "/w/checkpoints/step_400";
  e.root = "/w/checkpoints";
  for (uint64_t generation : {3u, 3u, 4u}) {  // twice in one generation counts once
    e.generation = generation;
    const BookEffects out = Step(book, e);
    EXPECT_FALSE(out.fail.has_value()) << generation;
    EXPECT_TRUE(out.error);
    EXPECT_TRUE(absl::StrContains(out.reason, "the world restarts from the last committed checkpoint")) << out.reason;
  }
  EXPECT_TRUE(absl::StrContains(book.reason, "attempt 2 of 3")) << book.reason;
  e.generation = 5;
  const BookEffects out = Step(book, e);
  ASSERT_TRUE(out.fail.has_value());
  EXPECT_EQ(out.fail->code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StrContains(out.fail->message(), "failed in 3 generations")) << *out.fail;
  EXPECT_EQ(book.reason, std::string(out.fail->message()));
  EXPECT_EQ(book.failures, 4);
  EXPECT_EQ(book.save_failures.at(600).size(), 3u);
}

TEST(CheckpointBookTest, ABadCheckpointFallsBackOrStopsWhenNothingIsLeft) {
  CheckpointBook book;
  ev::BadCheckpoint e;
  e.step = 800;
  e.rank = 0;
  e.why = "shard-00001: checksum does not match the manifest";
  e.root = "/w/checkpoints";
  e.first = true;
  e.fallback_step = 600;
  e.fallback_dir = "/w/checkpoints/step_600";
  BookEffects out = Step(book, e);
  ASSERT_TRUE(out.mark_bad.has_value());
  EXPECT_EQ(out.mark_bad->step, 800);
  ASSERT_TRUE(out.break_world.has_value());
  EXPECT_FALSE(out.fail.has_value());
  EXPECT_TRUE(absl::StrContains(book.reason, "marked bad, falling back to step 600")) << book.reason;
  // Another rank's report of the same step: nothing more.
  e.first = false;
  out = Step(book, e);
  EXPECT_FALSE(out.mark_bad.has_value());
  EXPECT_FALSE(out.break_world.has_value());
  // Nothing older is usable: stop, never train from scratch over them.
  e.first = true;
  e.step = 600;
  e.fallback_step = 0;
  e.fallback_dir = "";
  out = Step(book, e);
  ASSERT_TRUE(out.fail.has_value());
  EXPECT_EQ(out.fail->code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(out.fail->message(), "not training from scratch")) << *out.fail;
  EXPECT_FALSE(out.break_world.has_value());
}

TEST(CheckpointBookTest, AFailedCommitIsCountedAndSaid) {
  CheckpointBook book;
  const BookEffects out = Step(book, ev::CommitFailed{400, "rename: Input/output error"});
  EXPECT_TRUE(out.error);
  EXPECT_EQ(book.failures, 1);
  EXPECT_TRUE(absl::StrContains(book.reason, "checkpoint at step 400 not committed: rename")) << book.reason;
}

}  // namespace
}  // namespace shardline
