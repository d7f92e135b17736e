#include "worker/train/param_agreement.h"

#include <gtest/gtest.h>

#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "common/faults/corruption.h"
#include "common/job/shard.h"
#include "worker/collective/local_transport.h"
#include "worker/collective/peer_fault.h"
#include "worker/collective/ring.h"
#include "worker/train/step_scalars.h"
#include "worker/train/train_loop.h"
#include "tests/worker/train/fmnist_suite.h"

namespace shardline {
namespace {

using Kind = AgreementVerdict::Kind;

constexpr uint64_t kA = 0x0123456789abcdefull, kB = 0xfedcba9876543210ull, kC = 0x1111111122222222ull;

TEST(JudgeAgreementTest, TheTable) {
  struct Case {
    std::vector<uint64_t> hashes;
    Kind kind;
    std::vector<int> named;
  };
  const Case cases[] = {
      {{kA}, Kind::kAgree, {}},
      {{kA, kA, kA, kA}, Kind::kAgree, {}},
      {{kA, kA, kB}, Kind::kNamed, {2}},
      {{kB, kA, kA}, Kind::kNamed, {0}},
      {{kA, kC, kA, kB, kA}, Kind::kNamed, {1, 3}},  // 3 of 5 hold kA
      {{kA, kB}, Kind::kSplit, {}},                  // two ranks: nobody can be named
      {{kA, kA, kB, kB}, Kind::kSplit, {}},          // an even split
      {{kA, kB, kC}, Kind::kSplit, {}},
  };
  for (const Case& c : cases) {
    const AgreementVerdict v = JudgeAgreement(c.hashes);
    EXPECT_EQ(v.kind, c.kind) << c.hashes.size() << " ranks";
    EXPECT_EQ(v.named, c.named) << c.hashes.size() << " ranks";
    EXPECT_EQ(v.hashes, c.hashes);
  }
}

TEST(JudgeAgreementTest, TheStatusNamesTheRanksAsWorkersAndEveryHash) {
  const AgreementVerdict named = JudgeAgreement({kA, kB, kA});
  absl::Status s = AgreementStatus(named, "the parameters", 41);
  EXPECT_TRUE(absl::IsInternal(s)) << s;  // the world restarts; not fatal
  EXPECT_EQ(PeerFaultRank(s), 1);
  EXPECT_TRUE(absl::StrContains(s.message(), "parameter agreement failed at step 41: rank 1 held other bits")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "rank 1 fedcba9876543210")) << s;
  // An island's ring: its index 1 is worker 4.
  const std::vector<int> workers = {3, 4, 5};
  s = AgreementStatus(named, "the parameters", 41, workers);
  EXPECT_EQ(PeerFaultRank(s), 4);
  EXPECT_TRUE(absl::StrContains(s.message(), "rank 4 held other bits")) << s;
  s = AgreementStatus(JudgeAgreement({kA, kB}), "the parameters", 7);
  EXPECT_TRUE(absl::IsInternal(s)) << s;
  EXPECT_EQ(PeerFaultRank(s), -1);
  EXPECT_TRUE(absl::StrContains(s.message(), "no majority names one")) << s;
  EXPECT_TRUE(IsUnresolvedMismatch(s)) << s;
  EXPECT_TRUE(AgreementStatus(JudgeAgreement({kA, kA}), "x", 1).ok());
}

TEST(JudgeAgreementTest, HalvesAreExactAndGarbageIsNoHash) {
  for (uint64_t h : {kA, kB, kC, uint64_t{0}, ~uint64_t{0}}) EXPECT_EQ(HashFromHalves(HashHigh(h), HashLow(h)), h);
  EXPECT_EQ(HashFromHalves(1e300, 0), 0u);
  EXPECT_EQ(HashFromHalves(-1, 0), 0u);
  EXPECT_EQ(HashFromHalves(0.5, 0), 0u);
}

TEST(JudgeAgreementTest, TheStepScalarsSeeADisagreementThroughMinAndMax) {
  StepScalars a, b;
  a.param_hash = kA;
  b.param_hash = kA;
  auto reduce = [](const StepScalars& x, const StepScalars& y) {
    std::array<double, StepScalars::kCount> p = x.Pack(), q = y.Pack();
    for (int i = 0; i < StepScalars::kCount; ++i) {
      if (StepScalars::kOps[i] == ReduceOp::kMin) p[i] = std::min(p[i], q[i]);
      if (StepScalars::kOps[i] == ReduceOp::kMax) p[i] = std::max(p[i], q[i]);
      if (StepScalars::kOps[i] == ReduceOp::kSum) p[i] += q[i];
    }
    return StepScalars::Unpack(p);
  };
  EXPECT_TRUE(reduce(a, b).params_agree);
  EXPECT_EQ(reduce(a, b).param_hash, kA);
  b.param_hash = kA ^ 1;  // the low half only
  EXPECT_FALSE(reduce(a, b).params_agree);
  b.param_hash = kA ^ (uint64_t{1} << 63);  // the high half only
  EXPECT_FALSE(reduce(a, b).params_agree);
}

// --- the whole loop: ranks in this process, one of them receiving a bad chunk ---

constexpr int kFaultyRank = 1;

// Flips one bit of what rank kFaultyRank's `at_call`-th all-gather brought
// from another rank (the first value of the next rank's chunk): a received
// chunk gone bad on the way or in memory.
class FlippingCollectives : public Collectives {
 public:
  FlippingCollectives(Collectives* inner, int at_call) : inner_(inner), at_call_(at_call) {}
  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  int nonfinite_source() const override { return inner_->nonfinite_source(); }
  absl::Status ReduceScatter(absl::Span<float> buffer) override { return inner_->ReduceScatter(buffer); }
  absl::Status AllGather(absl::Span<float> buffer) override {
    absl::Status s = inner_->AllGather(buffer);
    if (s.ok() && rank() == kFaultyRank && ++calls_ == at_call_) {
      const int64_t n = static_cast<int64_t>(buffer.size());
      const Range theirs = ShardRange(n, (rank() + 1) % world_size(), world_size());
      if (!theirs.empty()) FlipFloatBit(&buffer[static_cast<size_t>(theirs.begin)], 22);
    }
    return s;
  }
  absl::Status AllReduceScalars(absl::Span<double> values, absl::Span<const ReduceOp> ops) override {
    return inner_->AllReduceScalars(values, ops);
  }
  absl::StatusOr<std::string> SendRecv(int send_to, absl::string_view data, int recv_from) override {
    return inner_->SendRecv(send_to, data, recv_from);
  }

 private:
  Collectives* inner_;
  int at_call_;
  int calls_ = 0;
};

class ParamAgreementTrainingTest : public FashionMnistSuite {
 protected:
  static config::JobConfig Config(const std::vector<std::string>& overrides) {
    std::vector<std::string> all = {"data.global_batch_size=96"};
    all.insert(all.end(), overrides.begin(), overrides.end());
    return ShortJob(8, 4, 8, all);  // evaluated at the end only: the gathers below are the steps'

  }

  struct Trained {
    std::vector<absl::Status> statuses;  // by rank
    std::vector<double> losses;          // rank 0's, every step (when it ended OK)
  };

  // Trains `c` on `world` ranks over the in-process ring; rank kFaultyRank's
  // `at_call`-th all-gather brings one bad bit (0: none).
  static Trained Train(const config::JobConfig& c, int world, int at_call) {
    std::vector<absl::StatusOr<TrainResult>> results = TrainRanks(c, world, [at_call](int, Collectives* ring) {
      return std::unique_ptr<Collectives>(new FlippingCollectives(ring, at_call));
    });
    Trained t;
    for (const auto& r : results) t.statuses.push_back(r.status());
    if (results[0].ok()) t.losses = results[0]->losses;
    return t;
  }
};

// Every bad bit is either caught, in the step that read it, with its rank
// named on every rank, or was never read (a gather started ahead and given
// back unused at stage 3): then every step's loss is the clean run's.
TEST_F(ParamAgreementTrainingTest, ABadGatheredValueIsCaughtInTheStepThatReadItOrWasNeverRead) {
  for (const char* stage : {"collective.zero_stage=2", "collective.zero_stage=3"}) {
    const Trained clean = Train(Config({stage}), 3, 0);
    for (const absl::Status& s : clean.statuses) ASSERT_TRUE(s.ok()) << stage << ": " << s;
    int caught = 0;
    for (int at_call = 2; at_call <= 7; ++at_call) {
      const Trained t = Train(Config({stage}), 3, at_call);
      if (t.statuses[0].ok()) {
        for (const absl::Status& s : t.statuses) EXPECT_TRUE(s.ok()) << stage << " call " << at_call << ": " << s;
        EXPECT_EQ(t.losses, clean.losses) << stage << " call " << at_call << ": a bad bit was read and not caught";
        continue;
      }
      ++caught;
      for (int r = 0; r < 3; ++r) {
        const absl::Status& s = t.statuses[static_cast<size_t>(r)];
        EXPECT_TRUE(absl::IsInternal(s)) << stage << " rank " << r << ": " << s;  // the world rejoins
        EXPECT_EQ(PeerFaultRank(s), kFaultyRank) << stage << " rank " << r << ": " << s;
        EXPECT_TRUE(absl::StrContains(s.message(), "rank 1 held other bits")) << s;
        EXPECT_EQ(s, t.statuses[0]) << stage << ": every rank reaches the same verdict";
      }
    }
    EXPECT_GE(caught, 4) << stage;
  }
}

TEST_F(ParamAgreementTrainingTest, WithTwoRanksTheStepFailsWithoutNamingEither) {
  const Trained t = Train(Config({}), 2, 3);
  for (const absl::Status& s : t.statuses) {
    EXPECT_TRUE(absl::IsInternal(s)) << s;
    EXPECT_EQ(PeerFaultRank(s), -1) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "no majority names one")) << s;
  }
}

}  // namespace
}  // namespace shardline
