// The membership state machine alone: no threads, gRPC, clock or disk. Each
// case is a script of (time, event) and what the state and effects must be
// after it.
#include "coordinator/decide/membership.h"

#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace shardline {
namespace {

namespace ev = membership_event;

const absl::Time kT0 = absl::FromUnixSeconds(1000);

ev::Claim ClaimOf(int slot, uint64_t incarnation, uint64_t previous_generation = 0) {
  ev::Claim c;
  c.requested_slot = slot;
  c.incarnation = incarnation;
  c.previous_generation = previous_generation;
  c.address = absl::StrCat("w", incarnation);
  return c;
}

MembershipConfig Fixed(int slots) {
  MembershipConfig c;
  c.slots = slots;
  c.heartbeat_timeout = absl::Seconds(5);
  return c;
}

MembershipConfig Elastic(int slots, int least) {
  MembershipConfig c = Fixed(slots);
  c.min_workers = least;
  c.replace_timeout = absl::Seconds(10);
  return c;
}

struct Line {
  absl::Duration at;  // after kT0
  MembershipEvent event;
  std::function<void(const Membership&, const MembershipEffects&)> check;
};

struct Case {
  std::string name;
  MembershipConfig config;
  std::vector<Line> script;
};

// The world of `slots` formed at generation 1 from incarnations 1..slots.
std::vector<Line> Formed(int slots) {
  std::vector<Line> lines;
  for (int s = 0; s < slots; ++s) {
    lines.push_back({absl::ZeroDuration(), ClaimOf(s, static_cast<uint64_t>(s + 1)),
                     [s, slots](const Membership& m, const MembershipEffects& out) {
                       ASSERT_TRUE(out.claim_taken.has_value());
                       EXPECT_EQ(out.claim_taken->slot, s);
                       EXPECT_EQ(out.formed.has_value(), s == slots - 1);
                     }});
  }
  return lines;
}

std::vector<Line> Then(std::vector<Line> first, std::vector<Line> more) {
  first.insert(first.end(), more.begin(), more.end());
  return first;
}

std::vector<Case> Cases() {
  std::vector<Case> cases;
  cases.push_back({"AWorldFormsOnceEverySlotIsClaimedRankEqualsSlot", Fixed(3),
                   Then(Formed(3), {{absl::ZeroDuration(), ev::Tick{},
                                     [](const Membership& m, const MembershipEffects& out) {
                                       EXPECT_EQ(m.state, JobState::kRunning);
                                       EXPECT_EQ(m.generation, 1u);
                                       EXPECT_EQ(m.world_size, 3);
                                       for (const auto& [rank, w] : m.members) EXPECT_EQ(rank, w.slot);
                                       EXPECT_TRUE(m.pending.empty());
                                       EXPECT_FALSE(out.broken.has_value());
                                     }}})});
  cases.push_back(
      {"ASlotClaimedByAnotherWorkerIsRefusedTheSameWorkerMayClaimAgain", Fixed(2),
       {{absl::ZeroDuration(), ClaimOf(1, 7), [](const Membership& m, const MembershipEffects& out) {
           EXPECT_TRUE(out.claim_taken.has_value());
         }},
        {absl::ZeroDuration(), ClaimOf(1, 8), [](const Membership& m, const MembershipEffects& out) {
           ASSERT_TRUE(out.claim_refused.has_value());
           EXPECT_EQ(out.claim_refused->code(), absl::StatusCode::kAlreadyExists);
         }},
        {absl::ZeroDuration(), ClaimOf(-1, 7), [](const Membership& m, const MembershipEffects& out) {
           ASSERT_TRUE(out.claim_taken.has_value());
           EXPECT_EQ(out.claim_taken->slot, 1);  // its own claim, not the lowest free
         }},
        {absl::ZeroDuration(), ClaimOf(5, 9), [](const Membership& m, const MembershipEffects& out) {
           ASSERT_TRUE(out.claim_refused.has_value());
           EXPECT_EQ(out.claim_refused->code(), absl::StatusCode::kInvalidArgument);
         }},
        {absl::ZeroDuration(), ev::Cancel{1, 8}, [](const Membership& m, const MembershipEffects&) {
           EXPECT_EQ(m.pending.count(1), 1u);  // not its claim
         }},
        {absl::ZeroDuration(), ev::Cancel{1, 7}, [](const Membership& m, const MembershipEffects&) {
           EXPECT_TRUE(m.pending.empty());
         }}}});
  cases.push_back({"ARunningFixedWorldTakesNoOne", Fixed(2),
                   Then(Formed(2),
                        {{absl::ZeroDuration(), ClaimOf(0, 50), [](const Membership&, const MembershipEffects& out) {
                            ASSERT_TRUE(out.claim_refused.has_value());
                            EXPECT_EQ(out.claim_refused->code(), absl::StatusCode::kAlreadyExists);
                          }},
                         {absl::ZeroDuration(), ClaimOf(-1, 50), [](const Membership& m, const MembershipEffects& out) {
                            ASSERT_TRUE(out.claim_refused.has_value());
                            EXPECT_EQ(out.claim_refused->code(), absl::StatusCode::kResourceExhausted);
                            EXPECT_EQ(m.state, JobState::kRunning);
                          }}})});
  cases.push_back({"AMemberRegisteringAgainBreaksTheWorldAndClaimsForTheNext", Fixed(2),
                   Then(Formed(2), {{absl::ZeroDuration(), ClaimOf(0, 1, /*previous_generation=*/1),
                                     [](const Membership& m, const MembershipEffects& out) {
                                       ASSERT_TRUE(out.broken.has_value());
                                       EXPECT_FALSE(out.broken->planned);
                                       EXPECT_NE(out.broken->why.find("rank 0 left it"), std::string::npos);
                                       ASSERT_TRUE(out.claim_taken.has_value());
                                       EXPECT_EQ(out.claim_taken->target, 2u);
                                       EXPECT_EQ(m.state, JobState::kForming);
                                     }}})});
  cases.push_back({"AFinishedMemberRegisteringAgainWaitsForTheEnd", Fixed(2),
                   Then(Formed(2), {{absl::ZeroDuration(), ev::Finished{0}, nullptr},
                                    {absl::ZeroDuration(), ClaimOf(0, 1, 1),
                                     [](const Membership& m, const MembershipEffects& out) {
                                       EXPECT_TRUE(out.claim_waits_for_end);
                                       EXPECT_FALSE(out.broken.has_value());
                                       EXPECT_EQ(m.state, JobState::kRunning);
                                     }}})});
  cases.push_back({"ASilentMemberIsEvictedAtItsDeadlineAFinishedOneIsNot", Fixed(2),
                   Then(Formed(2), {{absl::ZeroDuration(), ev::Finished{1}, nullptr},
                                    {absl::Seconds(4), ev::Heard{0, 10}, nullptr},
                                    {absl::Seconds(8), ev::Tick{},
                                     [](const Membership& m, const MembershipEffects& out) {
                                       EXPECT_FALSE(out.broken.has_value());  // 4 s since rank 0's report
                                     }},
                                    {absl::Seconds(9) + absl::Milliseconds(1), ev::Tick{},
                                     [](const Membership& m, const MembershipEffects& out) {
                                       ASSERT_TRUE(out.broken.has_value());
                                       EXPECT_NE(out.broken->why.find("rank 0"), std::string::npos);
                                       EXPECT_TRUE(m.members.at(0).evicted);
                                       EXPECT_FALSE(m.members.at(1).evicted);
                                       EXPECT_EQ(m.evictions, 1u);
                                     }}})});
  cases.push_back({"AStalledCoordinatorRestartsEveryDeadline", Fixed(1),
                   Then(Formed(1), {{absl::Seconds(60), ev::RestartDeadlines{},
                                     [](const Membership&, const MembershipEffects& out) {
                                       EXPECT_TRUE(out.deadlines_restarted);
                                     }},
                                    {absl::Seconds(61), ev::Tick{},
                                     [](const Membership& m, const MembershipEffects& out) {
                                       EXPECT_FALSE(out.broken.has_value());
                                       EXPECT_EQ(m.state, JobState::kRunning);
                                     }}})});
  cases.push_back(
      {"AnElasticWorldFormsSmallerAfterTheReplaceTimeoutClosingRankGaps", Elastic(3, 2),
       {{absl::ZeroDuration(), ClaimOf(0, 1), nullptr},
        {absl::ZeroDuration(), ClaimOf(2, 3), nullptr},
        {absl::Seconds(9), ev::Tick{}, [](const Membership& m, const MembershipEffects& out) {
           EXPECT_FALSE(out.formed.has_value());
         }},
        {absl::Seconds(10), ev::Tick{}, [](const Membership& m, const MembershipEffects& out) {
           ASSERT_TRUE(out.formed.has_value());
           EXPECT_NE(out.formed->why.find("1 of 3 workers not back"), std::string::npos);
           EXPECT_EQ(m.world_size, 2);
           EXPECT_EQ(m.members.at(1).slot, 2);  // rank 1 holds slot 2
         }}}});
  cases.push_back({"AnElasticWorldShortOfItsLeastWaitsAndSaysSoOncePerTimeout", Elastic(3, 2),
                   {{absl::ZeroDuration(), ClaimOf(0, 1), nullptr},
                    {absl::Seconds(10), ev::Tick{}, [](const Membership& m, const MembershipEffects& out) {
                       ASSERT_TRUE(out.short_of_workers.has_value());
                       EXPECT_EQ(out.short_of_workers->have, 1);
                       EXPECT_EQ(m.state, JobState::kForming);
                     }},
                    {absl::Seconds(15), ev::Tick{}, [](const Membership&, const MembershipEffects& out) {
                       EXPECT_FALSE(out.short_of_workers.has_value());
                     }},
                    {absl::Seconds(20), ev::Tick{}, [](const Membership&, const MembershipEffects& out) {
                       EXPECT_TRUE(out.short_of_workers.has_value());
                     }}}});
  cases.push_back(
      {"ASmallerWorldGrowsAtTheNextCommitThenFormsWithEveryone", Elastic(3, 2),
       {{absl::ZeroDuration(), ClaimOf(0, 1), nullptr},
        {absl::ZeroDuration(), ClaimOf(1, 2), nullptr},
        {absl::Seconds(10), ev::Tick{}, [](const Membership& m, const MembershipEffects& out) {
           ASSERT_TRUE(out.formed.has_value());
         }},
        {absl::Seconds(11), ClaimOf(2, 3), [](const Membership& m, const MembershipEffects& out) {
           ASSERT_TRUE(out.claim_taken.has_value());
           EXPECT_TRUE(out.claim_taken->joining);
           EXPECT_TRUE(out.wants_checkpoint);
           EXPECT_EQ(m.state, JobState::kRunning);
         }},
        {absl::Seconds(12), ev::Committed{40}, [](const Membership& m, const MembershipEffects& out) {
           ASSERT_TRUE(out.broken.has_value());
           EXPECT_TRUE(out.broken->planned);
           EXPECT_EQ(out.broken->grow_step, 40);
           EXPECT_EQ(m.form_target, 3);
         }},
        {absl::Seconds(12), ClaimOf(0, 1, 1), [](const Membership&, const MembershipEffects& out) {
           EXPECT_FALSE(out.formed.has_value());
         }},
        {absl::Seconds(12), ClaimOf(1, 2, 1), [](const Membership& m, const MembershipEffects& out) {
           ASSERT_TRUE(out.formed.has_value());
           EXPECT_EQ(out.formed->previous_size, 2);
           EXPECT_EQ(m.world_size, 3);
           EXPECT_EQ(m.generation, 2u);
         }}}});
  MembershipConfig no_checkpoints = Elastic(2, 1);
  no_checkpoints.saves_checkpoints = false;
  cases.push_back({"WithoutCheckpointsAJoinerGrowsTheWorldAtOnce", no_checkpoints,
                   {{absl::ZeroDuration(), ClaimOf(0, 1), nullptr},
                    {absl::Seconds(10), ev::Tick{}, nullptr},
                    {absl::Seconds(11), ClaimOf(1, 2), [](const Membership& m, const MembershipEffects& out) {
                       ASSERT_TRUE(out.broken.has_value());
                       EXPECT_TRUE(out.broken->planned);
                       EXPECT_FALSE(out.wants_checkpoint);
                       EXPECT_EQ(m.state, JobState::kForming);
                     }}}});
  cases.push_back({"AStopWhileFormingEndsTheJob", Fixed(2),
                   {{absl::ZeroDuration(), ClaimOf(0, 1), nullptr},
                    {absl::ZeroDuration(), ev::Stop{}, [](const Membership& m, const MembershipEffects& out) {
                      EXPECT_TRUE(out.stopped_forming);
                      EXPECT_EQ(m.state, JobState::kDone);
                    }},
                    {absl::ZeroDuration(), ClaimOf(1, 2), [](const Membership&, const MembershipEffects& out) {
                      EXPECT_TRUE(out.claim_refused.has_value());
                    }}}});
  cases.push_back({"AStopWhileRunningStopsAndAWorldFormedAfterItStopsToo", Fixed(2),
                   Then(Formed(2), {{absl::ZeroDuration(), ev::Stop{},
                                     [](const Membership& m, const MembershipEffects& out) {
                                       EXPECT_TRUE(out.stop_scheduled);
                                       EXPECT_EQ(m.state, JobState::kStopping);
                                     }},
                                    {absl::ZeroDuration(), ev::Stop{},
                                     [](const Membership&, const MembershipEffects& out) {
                                       EXPECT_FALSE(out.stop_scheduled);  // once
                                     }},
                                    {absl::ZeroDuration(), ev::StreamEnded{1, 1, true}, nullptr},
                                    {absl::ZeroDuration(), ClaimOf(0, 1, 1), nullptr},
                                    {absl::ZeroDuration(), ClaimOf(1, 5), [](const Membership& m,
                                                                              const MembershipEffects& out) {
                                       ASSERT_TRUE(out.formed.has_value());
                                       EXPECT_EQ(m.state, JobState::kStopping);
                                     }}})});
  // Issue 46: SIGTERM to a coordinator whose workers died first left it
  // forming forever. A stop waits stop_forming_timeout for a world, then
  // ends by itself.
  cases.push_back({"AStopWhoseWorkersAreGoneEndsByItself", Fixed(2),
                   Then(Formed(2), {{absl::ZeroDuration(), ev::Stop{}, nullptr},
                                    {absl::Seconds(1), ev::StreamEnded{0, 1, true},
                                     [](const Membership& m, const MembershipEffects& out) {
                                       ASSERT_TRUE(out.broken.has_value());
                                       EXPECT_EQ(m.state, JobState::kForming);
                                     }},
                                    {absl::Seconds(1), ev::StreamEnded{1, 1, true}, nullptr},
                                    {absl::Seconds(15), ev::Tick{},
                                     [](const Membership& m, const MembershipEffects& out) {
                                       EXPECT_FALSE(out.stopped_forming);  // 14 s of forming: still waits
                                       EXPECT_EQ(m.state, JobState::kForming);
                                     }},
                                    {absl::Seconds(16), ev::Tick{},
                                     [](const Membership& m, const MembershipEffects& out) {
                                       EXPECT_TRUE(out.stopped_forming);
                                       EXPECT_TRUE(out.stop_gave_up_forming);
                                       EXPECT_EQ(m.state, JobState::kDone);
                                     }}})});
  // Without a stop, forming waits for the workers as long as it takes.
  cases.push_back({"WithoutAStopABrokenWorldWaitsForItsWorkers", Fixed(2),
                   Then(Formed(2), {{absl::Seconds(1), ev::StreamEnded{0, 1, true}, nullptr},
                                    {absl::Seconds(3600), ev::Tick{},
                                     [](const Membership& m, const MembershipEffects& out) {
                                       EXPECT_FALSE(out.stopped_forming);
                                       EXPECT_EQ(m.state, JobState::kForming);
                                     }}})});
  cases.push_back({"TheJobIsDoneOnceEveryMemberFinishedAndThenNothingBreaksIt", Fixed(2),
                   Then(Formed(2), {{absl::ZeroDuration(), ev::Finished{0},
                                     [](const Membership& m, const MembershipEffects& out) {
                                       EXPECT_FALSE(out.every_worker_finished);
                                     }},
                                    {absl::ZeroDuration(), ev::Finished{1},
                                     [](const Membership& m, const MembershipEffects& out) {
                                       EXPECT_TRUE(out.every_worker_finished);
                                       EXPECT_EQ(m.state, JobState::kDone);
                                     }},
                                    {absl::ZeroDuration(), ev::StreamEnded{0, 1, true},
                                     [](const Membership& m, const MembershipEffects& out) {
                                       EXPECT_FALSE(out.broken.has_value());
                                       EXPECT_EQ(m.state, JobState::kDone);
                                     }},
                                    {absl::ZeroDuration(), ev::Fail{},
                                     [](const Membership& m, const MembershipEffects&) {
                                       EXPECT_EQ(m.state, JobState::kDone);  // final
                                     }}})});
  cases.push_back({"AStreamThatBreaksAfterItsWorldBrokeIsOnlyLogged", Fixed(2),
                   Then(Formed(2), {{absl::ZeroDuration(), ev::Watchdog{0, "stuck"},
                                     [](const Membership& m, const MembershipEffects& out) {
                                       ASSERT_TRUE(out.broken.has_value());
                                       EXPECT_TRUE(m.members.at(0).evicted);
                                     }},
                                    {absl::ZeroDuration(), ev::StreamEnded{1, 1, true},
                                     [](const Membership&, const MembershipEffects& out) {
                                       EXPECT_FALSE(out.broken.has_value());
                                       EXPECT_TRUE(out.lost_while_forming.has_value());
                                     }},
                                    {absl::ZeroDuration(), ev::StreamEnded{1, 0, true},
                                     [](const Membership&, const MembershipEffects& out) {
                                       EXPECT_FALSE(out.lost_while_forming.has_value());  // another generation
                                     }}})});
  cases.push_back({"ASurvivorThatLeftBreaksTheWorldOnce", Fixed(2),
                   Then(Formed(2), {{absl::ZeroDuration(), ev::Left{1, "rank 0 went silent"},
                                     [](const Membership& m, const MembershipEffects& out) {
                                       ASSERT_TRUE(out.broken.has_value());
                                       EXPECT_TRUE(m.members.at(1).left);
                                     }},
                                    {absl::ZeroDuration(), ev::StreamEnded{1, 1, false},
                                     [](const Membership&, const MembershipEffects& out) {
                                       EXPECT_FALSE(out.lost_while_forming.has_value());  // it left
                                     }}})});
  cases.push_back({"TheGlobalStepIsTheSlowestMembersTheBreakKeepsIt", Fixed(2),
                   Then(Formed(2), {{absl::ZeroDuration(), ev::Heard{0, 30}, nullptr},
                                    {absl::ZeroDuration(), ev::Heard{1, 20}, nullptr},
                                    {absl::ZeroDuration(), ev::Heard{1, 10},
                                     [](const Membership& m, const MembershipEffects&) {
                                       EXPECT_EQ(m.GlobalStep(), 20);  // steps never go back
                                       EXPECT_EQ(m.FurthestStep(), 30);
                                     }}})});
  // Islands: a worker that names its island gets the lowest free rank of
  // that island's block; a full island, an island the job does not have,
  // or a rank of another island is refused, naming them.
  MembershipConfig islands = Fixed(4);
  islands.islands = 2;
  auto in_island = [](int island, uint64_t incarnation, int slot = -1) {
    ev::Claim c = ClaimOf(slot, incarnation);
    c.island = island;
    return c;
  };
  cases.push_back({"AWorkerOfAnIslandGetsARankOfItsBlock", islands,
                   {{absl::ZeroDuration(), in_island(1, 1),
                     [](const Membership&, const MembershipEffects& out) {
                       ASSERT_TRUE(out.claim_taken.has_value());
                       EXPECT_EQ(out.claim_taken->slot, 2);
                     }},
                    {absl::ZeroDuration(), in_island(1, 2),
                     [](const Membership&, const MembershipEffects& out) {
                       ASSERT_TRUE(out.claim_taken.has_value());
                       EXPECT_EQ(out.claim_taken->slot, 3);
                     }},
                    {absl::ZeroDuration(), in_island(1, 3),
                     [](const Membership&, const MembershipEffects& out) {
                       ASSERT_TRUE(out.claim_refused.has_value());
                       EXPECT_EQ(out.claim_refused->code(), absl::StatusCode::kResourceExhausted);
                       EXPECT_NE(out.claim_refused->message().find("island 1"), std::string::npos);
                     }},
                    {absl::ZeroDuration(), in_island(2, 4),
                     [](const Membership&, const MembershipEffects& out) {
                       ASSERT_TRUE(out.claim_refused.has_value());
                       EXPECT_EQ(out.claim_refused->code(), absl::StatusCode::kInvalidArgument);
                     }},
                    {absl::ZeroDuration(), in_island(0, 5, /*slot=*/3),
                     [](const Membership&, const MembershipEffects& out) {
                       ASSERT_TRUE(out.claim_refused.has_value());
                       EXPECT_NE(out.claim_refused->message().find("rank 3 is in island 1"), std::string::npos);
                     }},
                    {absl::ZeroDuration(), in_island(0, 6),
                     [](const Membership&, const MembershipEffects& out) {
                       ASSERT_TRUE(out.claim_taken.has_value());
                       EXPECT_EQ(out.claim_taken->slot, 0);
                     }},
                    {absl::ZeroDuration(), ClaimOf(-1, 7),  // no island: any free rank
                     [](const Membership&, const MembershipEffects& out) {
                       ASSERT_TRUE(out.claim_taken.has_value());
                       EXPECT_EQ(out.claim_taken->slot, 1);
                       EXPECT_TRUE(out.formed.has_value());
                     }}}});
  // Elastic by islands (runtime.min_islands): 3 islands of 2. Slot 1 of
  // island 0 is lost for good: after the replace timeout the world is the
  // two whole islands (slots 2-5 as ranks 0-3), slot 0's claim waits; when
  // slot 1 returns, island 0 is whole again and the world grows back at
  // the next commit. Short of whole islands, it waits and says so.
  MembershipConfig by_islands = Fixed(6);
  by_islands.islands = 3;
  by_islands.min_islands = 2;
  by_islands.replace_timeout = absl::Seconds(10);
  cases.push_back(
      {"AWorldOfIslandsShrinksAndGrowsByWholeIslands", by_islands,
       Then(Formed(6),
            {{absl::Seconds(1), ev::StreamEnded{1, 1, true},
              [](const Membership& m, const MembershipEffects& out) { ASSERT_TRUE(out.broken.has_value()); }},
             {absl::Seconds(2), ClaimOf(0, 1, 1), nullptr},
             {absl::Seconds(2), ClaimOf(2, 3, 1), nullptr},
             {absl::Seconds(2), ClaimOf(3, 4, 1), nullptr},
             {absl::Seconds(2), ClaimOf(4, 5, 1), nullptr},
             {absl::Seconds(2), ClaimOf(5, 6, 1),
              [](const Membership& m, const MembershipEffects& out) { EXPECT_FALSE(out.formed.has_value()); }},
             {absl::Seconds(11), ev::Tick{},
              [](const Membership& m, const MembershipEffects& out) {
                ASSERT_TRUE(out.formed.has_value());
                EXPECT_NE(out.formed->why.find("island 0 left out"), std::string::npos) << out.formed->why;
                EXPECT_EQ(m.world_size, 4);
                EXPECT_EQ(m.members.at(0).slot, 2);  // island 1 is the world's island 0
                EXPECT_EQ(m.members.at(3).slot, 5);
                EXPECT_EQ(m.pending.count(0), 1u);  // slot 0 waits for its island
              }},
             {absl::Seconds(12), ev::Committed{40},
              [](const Membership&, const MembershipEffects& out) { EXPECT_FALSE(out.broken.has_value()); }},
             {absl::Seconds(13), ClaimOf(1, 7),
              [](const Membership& m, const MembershipEffects& out) {
                ASSERT_TRUE(out.claim_taken.has_value());
                EXPECT_TRUE(out.claim_taken->joining);
                EXPECT_EQ(m.state, JobState::kRunning);
              }},
             {absl::Seconds(14), ev::Committed{50},
              [](const Membership& m, const MembershipEffects& out) {
                ASSERT_TRUE(out.broken.has_value());
                EXPECT_TRUE(out.broken->planned);
                EXPECT_EQ(m.form_target, 6);
              }},
             {absl::Seconds(14), ClaimOf(2, 3, 2), nullptr},
             {absl::Seconds(14), ClaimOf(3, 4, 2), nullptr},
             {absl::Seconds(14), ClaimOf(4, 5, 2), nullptr},
             {absl::Seconds(14), ClaimOf(5, 6, 2),
              [](const Membership& m, const MembershipEffects& out) {
                ASSERT_TRUE(out.formed.has_value());
                EXPECT_EQ(m.world_size, 6);
                EXPECT_EQ(m.members.at(0).slot, 0);
              }}})});
  by_islands.min_islands = 3;
  cases.push_back({"AWorldOfIslandsShortOfWholeIslandsWaits", by_islands,
                   {{absl::ZeroDuration(), ClaimOf(0, 1), nullptr},
                    {absl::ZeroDuration(), ClaimOf(1, 2), nullptr},
                    {absl::ZeroDuration(), ClaimOf(2, 3), nullptr},
                    {absl::ZeroDuration(), ClaimOf(3, 4), nullptr},
                    {absl::ZeroDuration(), ClaimOf(4, 5), nullptr},
                    {absl::Seconds(10), ev::Tick{}, [](const Membership& m, const MembershipEffects& out) {
                       EXPECT_FALSE(out.formed.has_value());
                       ASSERT_TRUE(out.short_of_workers.has_value());
                       EXPECT_EQ(out.short_of_workers->have, 5);
                       EXPECT_EQ(out.short_of_workers->whole_islands, 2);
                     }}}});
  return cases;
}

class MembershipTest : public testing::TestWithParam<Case> {};

TEST_P(MembershipTest, Script) {
  const Case& c = GetParam();
  Membership state;
  state.forming_since = kT0;
  int line = 0;
  for (const Line& l : c.script) {
    SCOPED_TRACE(absl::StrCat("line ", line++));
    const MembershipEffects out = Step(c.config, state, l.event, kT0 + l.at);
    if (l.check) l.check(state, out);
  }
}

INSTANTIATE_TEST_SUITE_P(Scripts, MembershipTest, testing::ValuesIn(Cases()),
                         [](const testing::TestParamInfo<Case>& info) { return info.param.name; });

TEST(MembershipStepTest, TheSameScriptGivesTheSameStateEveryTime) {
  // Pure: replaying a case's events gives equal states (no clock, no randomness).
  for (const Case& c : Cases()) {
    Membership a, b;
    a.forming_since = b.forming_since = kT0;
    for (const Line& l : c.script) {
      Step(c.config, a, l.event, kT0 + l.at);
      Step(c.config, b, l.event, kT0 + l.at);
    }
    EXPECT_EQ(a.generation, b.generation) << c.name;
    EXPECT_EQ(a.state, b.state) << c.name;
    EXPECT_EQ(a.members.size(), b.members.size()) << c.name;
    EXPECT_EQ(a.pending.size(), b.pending.size()) << c.name;
  }
}

}  // namespace
}  // namespace shardline
