#include "worker/train/audit.h"

#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "worker/collective/local_transport.h"
#include "worker/collective/peer_fault.h"
#include "worker/collective/ring.h"
#include "worker/train/train_loop.h"
#include "tests/worker/train/fmnist_suite.h"

namespace shardline {
namespace {

using Kind = AuditVerdict::Kind;

config::JobConfig WithAudits(int every, int stage) {
  config::JobConfig c;
  c.mutable_audit()->set_every_steps(every);
  c.mutable_collective()->set_zero_stage(stage);
  return c;
}

TEST(AuditPlanTest, EveryNthStepAtStageTwoInAWorldOfTwoOrMore) {
  const config::JobConfig c = WithAudits(50, 2);
  EXPECT_FALSE(AuditDue(c, 2, 0));
  EXPECT_FALSE(AuditDue(c, 2, 48));
  EXPECT_TRUE(AuditDue(c, 2, 49));
  EXPECT_FALSE(AuditDue(c, 2, 50));
  EXPECT_TRUE(AuditDue(c, 3, 99));
  EXPECT_FALSE(AuditDue(c, 1, 49)) << "a world of one has nobody to audit it";
  EXPECT_FALSE(AuditDue(WithAudits(50, 3), 2, 49)) << "stage 3 is not audited yet";
  EXPECT_FALSE(AuditDue(WithAudits(0, 2), 2, 49)) << "0: off";
  EXPECT_EQ(config::JobConfig().audit().every_steps(), 50) << "the default";
}

TEST(AuditPlanTest, TargetsAreAPermutationWithoutSelfAndRotateOverEveryOtherRank) {
  for (int world = 2; world <= 8; ++world) {
    for (uint64_t seed : {0ull, 7ull, 123456789ull}) {
      std::set<std::pair<int, int>> pairs;
      for (int64_t audit = 0; audit < world - 1; ++audit) {
        const int64_t step = audit * 50 + 49;
        std::set<int> audited;
        for (int r = 0; r < world; ++r) {
          const int t = AuditTarget(seed, step, 50, r, world);
          EXPECT_NE(t, r) << "world " << world;
          EXPECT_TRUE(t >= 0 && t < world);
          audited.insert(t);
          pairs.insert({r, t});
        }
        EXPECT_EQ(static_cast<int>(audited.size()), world) << "every rank audited once, world " << world;
      }
      EXPECT_EQ(static_cast<int>(pairs.size()), world * (world - 1))
          << "world - 1 audits check every ordered pair, world " << world << " seed " << seed;
    }
  }
}

// A round of `world` ranks, every hash 0, with these fingerprints (empty: unknown).
AuditRound RoundOf(int world, std::vector<uint64_t> numerics = {}) {
  AuditRound r;
  r.own.assign(static_cast<size_t>(world), 0);
  r.audited.assign(static_cast<size_t>(world), 0);
  r.numerics = std::move(numerics);
  return r;
}

TEST(AuditPlanTest, TheArbiterIsTheLowestThirdRankOnTheSameKernels) {
  EXPECT_EQ(Arbiter(RoundOf(3), 0, 1), 2);
  EXPECT_EQ(Arbiter(RoundOf(3), 2, 0), 1);
  EXPECT_EQ(Arbiter(RoundOf(5), 1, 2), 0);
  EXPECT_EQ(Arbiter(RoundOf(2), 0, 1), -1);
  // Rank 0 runs other kernels (RELAXED): it cannot arbitrate 1 and 2.
  EXPECT_EQ(Arbiter(RoundOf(4, {7, 9, 9, 9}), 1, 2), 3);
  EXPECT_EQ(Arbiter(RoundOf(3, {7, 9, 9}), 1, 2), -1);
  EXPECT_EQ(Arbiter(RoundOf(3, {0, 9, 9}), 1, 2), 0) << "0: unknown, taken as alike";
}

constexpr uint64_t kGood = 0x1111, kBad = 0x2222, kOther = 0x3333;

TEST(AuditVerdictTest, MismatchesAreTheAuditorsWhoseHashIsNotTheirTargetsOwn) {
  // Targets: 0 -> 1, 1 -> 2, 2 -> 0.
  const std::vector<int> targets = {1, 2, 0};
  AuditRound round{{kGood, kGood, kGood}, {kGood, kGood, kGood}};
  EXPECT_TRUE(Mismatches(round, targets).empty());
  round.own[1] = kBad;  // rank 1 computed its own wrong: its auditor 0 disagrees
  EXPECT_EQ(Mismatches(round, targets), std::vector<int>{0});
  round.audited[2] = kBad;  // and rank 2 recomputed rank 0's wrong
  EXPECT_EQ(Mismatches(round, targets), (std::vector<int>{0, 2}));
  // Rank 1 on other kernels (runtime.numerics RELAXED): its bits differ by
  // right, so rank 0's audit of it is no evidence.
  round.numerics = {5, 6, 5};
  EXPECT_EQ(Mismatches(round, targets), std::vector<int>{2});
}

TEST(AuditVerdictTest, TheArbiterSidesWithOneAndNamesTheOther) {
  const AuditRound round{{kGood, kBad, kGood}, {kGood, kGood, kGood}};
  AuditVerdict v = Arbitrate(round, /*auditor=*/0, /*target=*/1, /*arbiter=*/2, kGood);
  EXPECT_EQ(v.kind, Kind::kNamed);
  EXPECT_EQ(v.named, 1) << v.reason;  // the owner
  const AuditRound wrong_auditor{{kGood, kGood, kGood}, {kBad, kGood, kGood}};
  v = Arbitrate(wrong_auditor, 0, 1, 2, kGood);
  EXPECT_EQ(v.kind, Kind::kNamed);
  EXPECT_EQ(v.named, 0) << v.reason;  // the auditor
  v = Arbitrate(round, 0, 1, 2, kOther);
  EXPECT_EQ(v.kind, Kind::kUnresolved) << v.reason;
  EXPECT_TRUE(absl::StrContains(v.reason, "three ways")) << v.reason;
}

TEST(AuditVerdictTest, WithTwoRanksTheReplayNamesARankWhoseResultChanged) {
  const std::vector<int> targets = {1, 0};
  const AuditRound first{{kGood, kBad}, {kGood, kGood}};
  // Rank 1's own changed when replayed: a one-off or intermittent fault there.
  AuditVerdict v = JudgeReplay(first, AuditRound{{kGood, kGood}, {kGood, kGood}}, targets);
  EXPECT_EQ(v.kind, Kind::kNamed);
  EXPECT_EQ(v.named, 1) << v.reason;
  // Rank 0's recomputation of rank 1's changed.
  v = JudgeReplay(first, AuditRound{{kGood, kBad}, {kOther, kGood}}, targets);
  EXPECT_EQ(v.kind, Kind::kNamed);
  EXPECT_EQ(v.named, 0) << v.reason;
  // Both stable, still apart: nobody can be named from two ranks.
  v = JudgeReplay(first, first, targets);
  EXPECT_EQ(v.kind, Kind::kUnresolved) << v.reason;
}

TEST(AuditVerdictTest, TheStatusNamesTheWorkerAndIsNotFatal) {
  AuditVerdict v;
  v.kind = Kind::kNamed;
  v.named = 1;
  v.reason = "why";
  absl::Status s = AuditStatus(v, 99);
  EXPECT_TRUE(absl::IsInternal(s)) << s;
  EXPECT_EQ(PeerFaultRank(s), 1);
  EXPECT_TRUE(absl::StrContains(s.message(), "replay audit of step 99 names rank 1: why")) << s;
  const std::vector<int> island = {4, 5};
  EXPECT_EQ(PeerFaultRank(AuditStatus(v, 99, island)), 5);
  EXPECT_FALSE(IsUnresolvedMismatch(s));
  v.kind = Kind::kUnresolved;
  s = AuditStatus(v, 99);
  EXPECT_TRUE(absl::IsInternal(s)) << s;
  EXPECT_EQ(PeerFaultRank(s), -1);
  EXPECT_TRUE(IsUnresolvedMismatch(s)) << "what bounds the world's retries (worker_lifecycle.cc)";
  EXPECT_TRUE(AuditStatus(AuditVerdict(), 99).ok());
}

// --- clean runs in this process: every audit passes and changes no bits ---

class AuditTrainingTest : public FashionMnistSuite {
 protected:
  // Rank 0's losses of `c` on `world` in-process ranks; every rank must end
  // OK, having passed `audits` audits.
  static std::vector<double> Losses(const config::JobConfig& c, int world, int64_t audits) {
    const std::vector<absl::StatusOr<TrainResult>> results = TrainRanks(c, world);
    for (const auto& r : results) {
      EXPECT_TRUE(r.ok()) << r.status();
      if (r.ok()) {
        EXPECT_EQ(r->audits, audits);
      }
    }
    return results[0].ok() ? results[0]->losses : std::vector<double>();
  }
};

TEST_F(AuditTrainingTest, AuditingEveryOtherStepPassesAndChangesNoBits) {
  for (const std::vector<std::string>& extra : std::vector<std::vector<std::string>>{
           {}, {"train.grad_accum_steps=2"}, {"collective.overlap=false"}, {"train.precision=BF16"}}) {
    for (int world : {2, 3}) {
      std::vector<std::string> sets = {"data.global_batch_size=96", "audit.every_steps=0"};
      sets.insert(sets.end(), extra.begin(), extra.end());
      const std::vector<double> off = Losses(ShortJob(8, 4, 0, sets), world, 0);
      ASSERT_EQ(off.size(), 8u);
      sets[1] = "audit.every_steps=2";
      EXPECT_EQ(Losses(ShortJob(8, 4, 0, sets), world, 4), off)
          << world << " ranks, " << (extra.empty() ? "defaults" : extra[0]);
    }
  }
}

}  // namespace
}  // namespace shardline
