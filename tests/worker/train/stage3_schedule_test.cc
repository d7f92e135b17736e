// Stage 3's schedule (stage3_schedule.h), decision by decision: what an
// announcement gathers, starts ahead and gives back in each pass, with and
// without overlap and reshard_after_forward; when a bucket's gradients are
// complete; how many reduce-scatters stay under way.
#include "worker/train/stage3_schedule.h"

#include <gtest/gtest.h>

#include <vector>

namespace shardline {
namespace {

struct Want {
  size_t lo, hi;
  int64_t first, last;
  bool release_others, in_order, past_first_layer;
};

void Expect(const ParamWindow& w, const Want& want, const char* what) {
  EXPECT_EQ(w.lo, want.lo) << what;
  EXPECT_EQ(w.hi, want.hi) << what;
  EXPECT_EQ(w.first, want.first) << what;
  EXPECT_EQ(w.last, want.last) << what;
  EXPECT_EQ(w.release_others, want.release_others) << what;
  EXPECT_EQ(w.in_order, want.in_order) << what;
  EXPECT_EQ(w.past_first_layer, want.past_first_layer) << what;
}

// Six buckets, one layer each (layer i begins at 10 i): a forward, the tied
// layer 0 read again, then the backward, as the GPT announces them.
TEST(Stage3ScheduleTest, APassGivesBackWhatItLeftAndPrefetchesInItsDirection) {
  const ScheduleOptions o{/*overlap=*/true, /*prefetch=*/2, /*reshard_after_forward=*/true};
  PassCursor c;
  Expect(c.Announce({0, 0}, 0, true, o), {0, 0, 1, 2, false, false, false}, "the forward's first layer");
  Expect(c.Announce({1, 1}, 10, true, o), {1, 1, 2, 3, true, true, false}, "the forward's second");
  Expect(c.Announce({5, 5}, 50, true, o), {5, 5, 6, 7, true, true, true}, "the forward's last");
  Expect(c.Announce({0, 0}, 0, true, o), {0, 0, 1, 0, false, false, true}, "the tied layer again: behind");
  Expect(c.Announce({0, 0}, 0, false, o), {0, 0, -2, -1, false, false, false}, "the backward's first: the head");
  Expect(c.Announce({5, 5}, 50, false, o), {5, 5, 3, 4, true, true, false}, "the backward's first in order");
  Expect(c.Announce({4, 4}, 40, false, o), {4, 4, 2, 3, true, true, true}, "the next");
  const ParamWindow w = c.Announce({4, 4}, 40, false, o);
  EXPECT_FALSE(w.in_order) << "the same layer again is not beyond the frontier";
  EXPECT_FALSE(w.release_others);
}

TEST(Stage3ScheduleTest, WithoutOverlapNothingIsStartedAheadAndWithoutReshardTheForwardKeepsAll) {
  PassCursor plain;
  const ScheduleOptions no_overlap{false, 2, true};
  Expect(plain.Announce({0, 1}, 0, true, no_overlap), {0, 1, 2, 1, false, false, false}, "first");
  Expect(plain.Announce({2, 3}, 20, true, no_overlap), {2, 3, 4, 3, true, true, false}, "second");
  PassCursor kept;
  const ScheduleOptions keep{true, 1, false};
  EXPECT_FALSE(kept.Announce({0, 0}, 0, true, keep).release_others);
  EXPECT_FALSE(kept.Announce({1, 1}, 10, true, keep).release_others) << "reshard_after_forward off";
  EXPECT_FALSE(kept.Announce({2, 2}, 20, false, keep).release_others) << "the backward's first";
  EXPECT_TRUE(kept.Announce({1, 1}, 10, false, keep).release_others) << "the backward gives back regardless";
}

TEST(Stage3ScheduleTest, EndingAPassStartsANewOne) {
  const ScheduleOptions o{true, 1, true};
  PassCursor c;
  c.Announce({0, 0}, 0, true, o);
  c.Announce({1, 1}, 10, true, o);
  c.EndPass();  // an evaluation's forward ended
  Expect(c.Announce({0, 0}, 0, true, o), {0, 0, 1, 1, false, false, false}, "a new pass's first layer");
}

TEST(Stage3ScheduleTest, ABucketCompletesOnceWhenItsLastElementIsFinished) {
  // Buckets [0,10) [10,25) [25,30); parts cut across them.
  BucketCompletion c({Range{0, 10}, Range{10, 25}, Range{25, 30}});
  EXPECT_TRUE(c.Finish(Range{26, 30}).empty());
  EXPECT_EQ(c.Finish(Range{12, 26}), (std::vector<size_t>{2}));
  EXPECT_EQ(c.Finish(Range{0, 12}), (std::vector<size_t>{1, 0})) << "descending";
  EXPECT_TRUE(c.Finish(Range{0, 30}).empty()) << "complete buckets complete once";
  EXPECT_TRUE(c.complete(0) && c.complete(1) && c.complete(2));
  c.Reset();
  EXPECT_FALSE(c.complete(1));
  EXPECT_EQ(c.Finish(Range{0, 30}), (std::vector<size_t>{2, 1, 0}));
}

TEST(Stage3ScheduleTest, ReduceScattersUnderWayAreOnePlusPrefetchWithOverlapAndNoneWithout) {
  EXPECT_EQ(ReducesInFlight({true, 1, true}), 2u);
  EXPECT_EQ(ReducesInFlight({true, 3, true}), 4u);
  EXPECT_EQ(ReducesInFlight({false, 3, true}), 0u);
}

}  // namespace
}  // namespace shardline
