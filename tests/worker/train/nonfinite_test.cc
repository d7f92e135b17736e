#include "worker/train/nonfinite.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <thread>

#include "absl/strings/match.h"
#include "common/job/config.h"
#include "common/job/shard.h"
#include "worker/collective/local_transport.h"
#include "worker/collective/peer_fault.h"
#include "worker/collective/ring.h"
#include "worker/model/gemm.h"
#include "worker/train/train_loop.h"
#include "tests/worker/train/fmnist_suite.h"

namespace shardline {
namespace {

using Kind = NonFiniteVerdict::Kind;

NonFiniteObservation Saw(NonFiniteSource s, int peer, int64_t step) {
  NonFiniteObservation o;
  o.Note(s, peer, step);
  return o;
}

TEST(JudgeTest, NothingSeenIsClean) {
  EXPECT_EQ(Judge(std::vector<NonFiniteObservation>(4)).kind, Kind::kClean);
}

TEST(JudgeTest, OwnGradientsAreADivergenceOfThatRankEvenWhenOthersReceivedThem) {
  // Rank 2's gradients went non-finite; ranks 3 and 0 got them in the
  // reduce-scatter (from 2, then forwarded by 3).
  std::vector<NonFiniteObservation> seen(4);
  seen[2] = Saw(NonFiniteSource::kOwnGradients, 2, 7);
  seen[3] = Saw(NonFiniteSource::kReducedFromPeer, 2, 7);
  seen[0] = Saw(NonFiniteSource::kReducedFromPeer, 3, 7);
  const NonFiniteVerdict v = Judge(seen);
  EXPECT_EQ(v.kind, Kind::kDiverged);
  EXPECT_EQ(v.rank, 2);
  EXPECT_EQ(v.evidence.step, 7);
}

TEST(JudgeTest, ValuesFromAPeerNameTheOriginNotTheRanksThatForwardedThem) {
  // Rank 1 sent NaN (its own numbers were finite); 2 received it from 1,
  // 3 from 2, 0 from 3.
  std::vector<NonFiniteObservation> seen(4);
  seen[2] = Saw(NonFiniteSource::kReducedFromPeer, 1, 5);
  seen[3] = Saw(NonFiniteSource::kReducedFromPeer, 2, 5);
  seen[0] = Saw(NonFiniteSource::kReducedFromPeer, 3, 5);
  const NonFiniteVerdict v = Judge(seen);
  EXPECT_EQ(v.kind, Kind::kPeerFault);
  EXPECT_EQ(v.rank, 1);
  EXPECT_EQ(v.evidence.source, NonFiniteSource::kReducedFromPeer);
  const absl::Status s = VerdictStatus(v);
  EXPECT_EQ(PeerFaultRank(s), 1);
  EXPECT_TRUE(absl::StrContains(s.message(), "rank 1 sent non-finite values in the reduce-scatter of step 5")) << s;
}

TEST(JudgeTest, PoisonedParametersMakeLaterGradientsNonFiniteButTheEarlierGatherIsTheEvidence) {
  // The all-gather of step 4 brought NaN to ranks 0 (from 3) and 1 (from
  // 0); their step-5 gradients went non-finite as a consequence, which they
  // do not note (they saw the gather first). Rank 2 computed its step-5
  // gradients from clean parameters - and they were non-finite too: a
  // genuine divergence, but later than the gather.
  std::vector<NonFiniteObservation> seen(4);
  seen[0] = Saw(NonFiniteSource::kGatheredFromPeer, 3, 4);
  seen[1] = Saw(NonFiniteSource::kGatheredFromPeer, 0, 4);
  seen[2] = Saw(NonFiniteSource::kOwnGradients, 2, 5);
  const NonFiniteVerdict v = Judge(seen);
  EXPECT_EQ(v.kind, Kind::kPeerFault);
  EXPECT_EQ(v.rank, 3);
  EXPECT_EQ(v.evidence.step, 4);
}

TEST(JudgeTest, AnUpdateThatOverflowedIsADivergenceBeforeTheGatherThatSpreadIt) {
  std::vector<NonFiniteObservation> seen(3);
  seen[1] = Saw(NonFiniteSource::kOwnUpdate, 1, 9);
  seen[2] = Saw(NonFiniteSource::kGatheredFromPeer, 1, 9);
  seen[0] = Saw(NonFiniteSource::kGatheredFromPeer, 2, 9);
  const NonFiniteVerdict v = Judge(seen);
  EXPECT_EQ(v.kind, Kind::kDiverged);
  EXPECT_EQ(v.rank, 1);
  const absl::Status s = VerdictStatus(v);
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_EQ(PeerFaultRank(s), -1);
}

TEST(JudgeTest, OnlyTheFirstObservationOfARankCounts) {
  NonFiniteObservation o = Saw(NonFiniteSource::kGatheredFromPeer, 3, 4);
  o.Note(NonFiniteSource::kOwnGradients, 0, 5);
  EXPECT_EQ(o.source, NonFiniteSource::kGatheredFromPeer);
  EXPECT_EQ(o.step, 4);
}

// --- the whole loop: three ranks in this process, one of them faulty ---

constexpr int kWorld = 3;
constexpr int kFaultyRank = 1;

// A fault injected on one rank, after that rank's own checks: the memory
// the collective reads is corrupted between the arithmetic and the send.
enum class Poison { kNone, kReduceScatter, kAllGather, kScalars };

class PoisoningCollectives : public Collectives {
 public:
  PoisoningCollectives(Collectives* inner, Poison poison, int at_call)
      : inner_(inner), poison_(poison), at_call_(at_call) {}
  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  int nonfinite_source() const override { return inner_->nonfinite_source(); }

  absl::Status ReduceScatter(absl::Span<float> buffer) override {
    // Element 0 is in chunk 0, which rank 1 sends on in step 0.
    if (poison_ == Poison::kReduceScatter && ++calls_ == at_call_) buffer[0] = NaN();
    return inner_->ReduceScatter(buffer);
  }
  absl::Status AllGather(absl::Span<float> buffer) override {
    if (poison_ == Poison::kAllGather && ++calls_ == at_call_) {
      buffer[static_cast<size_t>(ShardRange(static_cast<int64_t>(buffer.size()), rank(), world_size()).begin)] =
          std::numeric_limits<float>::infinity();
    }
    return inner_->AllGather(buffer);
  }
  absl::Status AllReduceScalars(absl::Span<double> values, absl::Span<const ReduceOp> ops) override {
    if (poison_ == Poison::kScalars && ++calls_ == at_call_) values[0] = NaN();
    return inner_->AllReduceScalars(values, ops);
  }
  absl::StatusOr<std::string> SendRecv(int send_to, absl::string_view data, int recv_from) override {
    return inner_->SendRecv(send_to, data, recv_from);
  }

 private:
  static float NaN() { return std::numeric_limits<float>::quiet_NaN(); }
  Collectives* inner_;
  Poison poison_;
  int at_call_;
  int calls_ = 0;
};

class NonFiniteTrainingTest : public FashionMnistSuite {
 protected:
  // The default job cut to 8 steps of 96 examples, then `overrides`.
  static config::JobConfig Config(const std::vector<std::string>& overrides) {
    std::vector<std::string> all = {"data.global_batch_size=96"};
    all.insert(all.end(), overrides.begin(), overrides.end());
    return ShortJob(8, 4, 4, all);
  }

  // Trains `c` on kWorld ranks over the in-process ring; rank kFaultyRank
  // poisons its `at_call`-th call of the `poison` collective.
  static std::vector<absl::Status> Train(const config::JobConfig& c, Poison poison, int at_call) {
    LocalFabric fabric(kWorld);
    std::vector<std::unique_ptr<Transport>> transports;
    for (int r = 0; r < kWorld; ++r) transports.push_back(fabric.Connect(r));
    std::vector<absl::Status> statuses(kWorld);
    std::vector<std::thread> threads;
    for (int r = 0; r < kWorld; ++r) {
      threads.emplace_back([&, r] {
        CollectiveOptions o;
        o.env = Env::Default();
        o.timeout = absl::Seconds(60);
        RingCollectives ring(transports[static_cast<size_t>(r)].get(), o);
        PoisoningCollectives comm(&ring, r == kFaultyRank ? poison : Poison::kNone, at_call);
        TrainOptions options;
        options.env = Env::Default();
        options.show_progress = false;
        statuses[static_cast<size_t>(r)] = RunTraining(c, *data_, comm, options).status();
      });
    }
    for (std::thread& t : threads) t.join();
    return statuses;
  }
};

TEST_F(NonFiniteTrainingTest, CleanRunSucceeds) {
  for (const absl::Status& s : Train(Config({}), Poison::kNone, 0)) EXPECT_TRUE(s.ok()) << s;
}

TEST_F(NonFiniteTrainingTest, NaNSentInTheReduceScatterIsAPeerFaultNamingTheSenderOnEveryRank) {
  const std::vector<absl::Status> statuses = Train(Config({}), Poison::kReduceScatter, 3);
  for (int r = 0; r < kWorld; ++r) {
    const absl::Status& s = statuses[static_cast<size_t>(r)];
    EXPECT_EQ(PeerFaultRank(s), kFaultyRank) << "rank " << r << ": " << s;
    EXPECT_TRUE(absl::IsInternal(s)) << "rank " << r << ": " << s;  // the world rejoins; not fatal
    EXPECT_TRUE(absl::StrContains(s.message(), "rank 1 sent non-finite values in the reduce-scatter of step 2"))
        << "rank " << r << ": " << s;
    EXPECT_EQ(s, statuses[0]) << "every rank reaches the same verdict";
  }
}

TEST_F(NonFiniteTrainingTest, InfinitySentInTheAllGatherIsAPeerFaultNamingTheSender) {
  const std::vector<absl::Status> statuses = Train(Config({}), Poison::kAllGather, 2);
  for (int r = 0; r < kWorld; ++r) {
    const absl::Status& s = statuses[static_cast<size_t>(r)];
    EXPECT_EQ(PeerFaultRank(s), kFaultyRank) << "rank " << r << ": " << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "in the all-gather of step 1")) << "rank " << r << ": " << s;
  }
}

TEST_F(NonFiniteTrainingTest, InfinityInTheLastAllGatherIsCaughtBeforeTheFinalEvaluation) {
  // The 8th step's all-gather has no next step to judge it.
  const std::vector<absl::Status> statuses = Train(Config({}), Poison::kAllGather, 8);
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_EQ(PeerFaultRank(statuses[static_cast<size_t>(r)]), kFaultyRank)
        << "rank " << r << ": " << statuses[static_cast<size_t>(r)];
  }
}

TEST_F(NonFiniteTrainingTest, NaNLossSentInTheScalarAllReduceIsAPeerFaultNotADivergence) {
  const std::vector<absl::Status> statuses = Train(Config({}), Poison::kScalars, 3);
  for (int r : {0, 2}) {
    const absl::Status& s = statuses[static_cast<size_t>(r)];
    EXPECT_EQ(PeerFaultRank(s), kFaultyRank) << "rank " << r << ": " << s;
    EXPECT_FALSE(absl::StrContains(s.message(), "base_lr")) << s;
  }
  // The faulty rank is told its own value was non-finite.
  EXPECT_TRUE(absl::IsInvalidArgument(statuses[kFaultyRank])) << statuses[kFaultyRank];
}

TEST_F(NonFiniteTrainingTest, ADivergedRunStopsEveryRankAsADivergenceNotAPeerFault) {
  const std::vector<absl::Status> statuses =
      Train(Config({"schedule.base_lr=1e30", "schedule.warmup_steps=0", "schedule.decay=constant"}), Poison::kNone, 0);
  for (int r = 0; r < kWorld; ++r) {
    const absl::Status& s = statuses[static_cast<size_t>(r)];
    EXPECT_TRUE(absl::IsFailedPrecondition(s)) << "rank " << r << ": " << s;
    EXPECT_EQ(PeerFaultRank(s), -1) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "became non-finite")) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "within steps")) << s;
    EXPECT_EQ(s, statuses[0]) << "every rank reaches the same verdict";
  }
}

}  // namespace
}  // namespace shardline
