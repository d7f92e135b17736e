#include "worker/checkpoint/memory_snapshots.h"

#include <gtest/gtest.h>

#include <memory>

#include "absl/strings/match.h"
#include "common/job/shard.h"
#include "common/platform/status_macros.h"
#include "tests/worker/collective/world.h"
#include "worker/collective/ring.h"
#include "worker/model/bucket_plan.h"

namespace shardline {
namespace {

FlatLayout Layout() {
  FlatLayout layout;
  layout.Add("layer0/w", {13, 7});
  layout.Add("layer0/b", {7});
  return layout;
}

config::OptimizerConfig AdamW() {
  config::OptimizerConfig c;
  c.mutable_adamw()->set_weight_decay(0.01f);
  return c;
}

// One rank's state: full parameters, and an optimizer whose state and
// parameter shard carry values unique to (rank, step).
struct RankState {
  RankState(const FlatLayout& layout, int rank, int world)
      : optimizer(*Optimizer::Create(AdamW(), layout, {ShardRange(layout.total_size(), rank, world)})),
        params(static_cast<size_t>(layout.total_size())) {}
  void Fill(int64_t step) {
    for (size_t i = 0; i < params.size(); ++i) params[i] = static_cast<float>(step * 1000 + static_cast<int64_t>(i));
    for (StateBuffer* b : optimizer->state()) {
      for (size_t i = 0; i < b->values.size(); ++i) b->values[i] = static_cast<float>(step) + 0.5f * i;
    }
  }
  std::unique_ptr<Optimizer> optimizer;
  std::vector<float> params;
};

ShardSource Source(const FlatLayout& layout, RankState& s, int64_t step, int rank, int world) {
  ShardSource src;
  src.step = step;
  src.rank = rank;
  src.world = world;
  src.layout = &layout;
  src.params = s.params.data();
  src.optimizer = s.optimizer.get();
  src.position.set_next_step(step);
  src.best = BestSoFar{step - 1, 0.75};
  return src;
}

TEST(MemorySnapshotsTest, EachRankHoldsItsShardAndItsPredecessorsAndARestoreFromAReplicaIsExact) {
  const FlatLayout layout = Layout();
  constexpr int kWorld = 3;
  std::vector<std::unique_ptr<MemorySnapshots>> stores;
  std::vector<std::unique_ptr<RankState>> states;
  for (int r = 0; r < kWorld; ++r) {
    stores.push_back(std::make_unique<MemorySnapshots>(Env::Default(), /*keep_steps=*/2));
    states.push_back(std::make_unique<RankState>(layout, r, kWorld));
  }
  TestWorld world(TransportKind::kLocal, kWorld);
  const std::vector<absl::Status> taken = world.Run([&](int r, Transport* t) -> absl::Status {
    RingCollectives comm(t, CollectiveOptions{Env::Default()});
    for (int64_t step : {10, 20, 30}) {
      states[static_cast<size_t>(r)]->Fill(step);
      RETURN_IF_ERROR(stores[static_cast<size_t>(r)]->TakeAndReplicate(
          Source(layout, *states[static_cast<size_t>(r)], step, r, kWorld), /*copies=*/2, comm));
    }
    return absl::OkStatus();
  });
  for (const absl::Status& s : taken) ASSERT_TRUE(s.ok()) << s;
  // The newest two steps; rank r holds shards r and r-1.
  for (int r = 0; r < kWorld; ++r) {
    std::vector<SnapshotKey> want;
    for (int64_t step : {30, 20}) {
      for (int k : {r, (r + kWorld - 1) % kWorld}) want.push_back(SnapshotKey{step, kWorld, k});
    }
    std::sort(want.begin(), want.end(), [](const SnapshotKey& a, const SnapshotKey& b) {
      return a.step != b.step ? a.step > b.step : a.rank < b.rank;
    });
    EXPECT_EQ(stores[static_cast<size_t>(r)]->Held(), want) << "rank " << r;
  }
  // Rank 1 is lost: its replacement gets shard 1 of step 30 from rank 2.
  const SnapshotKey lost{30, kWorld, 1};
  absl::StatusOr<std::string> bytes = stores[2]->Bytes(lost);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  MemorySnapshots fresh(Env::Default());
  ASSERT_TRUE(fresh.Put(lost, *bytes).ok());
  RankState replacement(layout, 1, kWorld);
  absl::StatusOr<Restored> at = fresh.Restore(30, kWorld, layout, replacement.params.data(), replacement.optimizer.get());
  ASSERT_TRUE(at.ok()) << at.status();
  EXPECT_EQ(at->step, 30);
  EXPECT_EQ(at->position.next_step(), 30);
  EXPECT_EQ(at->best.step, 29);
  RankState original(layout, 1, kWorld);
  original.Fill(30);
  const Range shard = replacement.optimizer->pieces()[0];
  for (int64_t i = shard.begin; i < shard.end; ++i) {
    EXPECT_EQ(replacement.params[static_cast<size_t>(i)], original.params[static_cast<size_t>(i)]) << i;
  }
  for (size_t b = 0; b < original.optimizer->state().size(); ++b) {
    EXPECT_EQ(replacement.optimizer->state()[b]->values, original.optimizer->state()[b]->values);
  }
  // Another rank's range is not covered by what is held here; damage is caught.
  EXPECT_EQ(fresh.Restore(30, kWorld, layout, replacement.params.data(),
                          RankState(layout, 2, kWorld).optimizer.get()).status().code(),
            absl::StatusCode::kNotFound);
  std::string damaged = *bytes;
  damaged[damaged.size() / 2] ^= 4;
  const absl::Status bad = fresh.Put(SnapshotKey{30, kWorld, 1}, damaged);
  EXPECT_EQ(bad.code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(absl::StrContains(bad.message(), "step 30, shard 1 of 3")) << bad;
  EXPECT_FALSE(fresh.Holds(lost));
  EXPECT_EQ(fresh.Put(SnapshotKey{20, kWorld, 1}, *bytes).code(), absl::StatusCode::kDataLoss);  // wrong key
}

TEST(MemorySnapshotsTest, ASnapshotOfThreeRanksRestoresIntoTwoFromThePiecesOverlappingEachRange) {
  const FlatLayout layout = Layout();  // 98 parameters: [0,32) [32,65) [65,98) in 3; [0,49) [49,98) in 2
  constexpr int kOld = 3, kNew = 2;
  std::vector<std::unique_ptr<MemorySnapshots>> stores;
  std::vector<std::unique_ptr<RankState>> states;
  for (int r = 0; r < kOld; ++r) {
    stores.push_back(std::make_unique<MemorySnapshots>(Env::Default()));
    states.push_back(std::make_unique<RankState>(layout, r, kOld));
  }
  TestWorld world(TransportKind::kLocal, kOld);
  const std::vector<absl::Status> taken = world.Run([&](int r, Transport* t) -> absl::Status {
    RingCollectives comm(t, CollectiveOptions{Env::Default()});
    states[static_cast<size_t>(r)]->Fill(40);
    return stores[static_cast<size_t>(r)]->TakeAndReplicate(Source(layout, *states[static_cast<size_t>(r)], 40, r, kOld),
                                                            /*copies=*/2, comm);
  });
  for (const absl::Status& s : taken) ASSERT_TRUE(s.ok()) << s;
  const int64_t total = layout.total_size();
  for (int r = 0; r < kNew; ++r) {
    const Range mine = ShardRange(total, r, kNew);
    MemorySnapshots fresh(Env::Default());
    RankState rank(layout, r, kNew);
    // Only the old shard overlapping the range's start first: not enough.
    for (int s = 0; s < kOld; ++s) {
      const Range old = ShardRange(total, s, kOld);
      if (std::max(old.begin, mine.begin) >= std::min(old.end, mine.end)) continue;
      absl::StatusOr<std::string> bytes = stores[static_cast<size_t>(s)]->Bytes(SnapshotKey{40, kOld, s});
      ASSERT_TRUE(bytes.ok()) << bytes.status();
      ASSERT_TRUE(fresh.Put(SnapshotKey{40, kOld, s}, *bytes).ok());
      if (old.begin <= mine.begin) {
        EXPECT_EQ(fresh.Restore(40, kOld, layout, rank.params.data(), rank.optimizer.get()).status().code(),
                  absl::StatusCode::kNotFound) << "rank " << r;
      }
    }
    absl::StatusOr<Restored> at = fresh.Restore(40, kOld, layout, rank.params.data(), rank.optimizer.get());
    ASSERT_TRUE(at.ok()) << at.status();
    EXPECT_EQ(at->step, 40);
    EXPECT_EQ(at->position.next_step(), 40);
    for (int64_t g = mine.begin; g < mine.end; ++g) {
      int s = 0;  // the old shard holding g
      while (ShardRange(total, s, kOld).end <= g) ++s;
      const float want_state = 40.0f + 0.5f * static_cast<float>(g - ShardRange(total, s, kOld).begin);
      EXPECT_EQ(rank.params[static_cast<size_t>(g)], 40.0f * 1000 + static_cast<float>(g)) << g;
      for (StateBuffer* b : rank.optimizer->state()) {
        EXPECT_EQ(b->values[static_cast<size_t>(g - mine.begin)], want_state) << b->name << " " << g;
      }
    }
  }
}

// With gradient buckets a rank holds a piece of every bucket. A snapshot of
// 3 ranks cutting one plan restores into 2 ranks cutting another: every
// rank gets the parameters and state of exactly its pieces, read from the
// old shards' headers.
TEST(MemorySnapshotsTest, BucketedPiecesRestoreAcrossWorldsAndPlans) {
  FlatLayout layout;
  layout.Add("a/w", {13, 7});  // [0, 91)
  layout.Add("a/b", {7});      // [91, 98)
  layout.Add("b/w", {7, 5});   // [98, 133)
  layout.Add("c/w", {40});     // [133, 173)
  const int64_t total = layout.total_size();
  const std::vector<Range> old_plan = BucketPlan(layout, 45), new_plan = BucketPlan(layout, 0);
  ASSERT_EQ(old_plan.size(), 3u);
  constexpr int kOld = 3, kNew = 2;
  auto value = [](int buffer, int64_t flat) { return static_cast<float>(buffer * 1000 + flat); };
  std::vector<std::unique_ptr<MemorySnapshots>> stores;
  std::vector<std::unique_ptr<Optimizer>> opts;
  std::vector<std::vector<float>> params;
  for (int r = 0; r < kOld; ++r) {
    stores.push_back(std::make_unique<MemorySnapshots>(Env::Default()));
    opts.push_back(*Optimizer::Create(AdamW(), layout, OwnedPieces(old_plan, r, kOld)));
    params.emplace_back(static_cast<size_t>(total), -1.0f);
    for (const PieceCopy& run : SharedRuns(opts.back()->pieces(), {Range{0, total}})) {
      for (int64_t i = 0; i < run.size; ++i) {
        params.back()[static_cast<size_t>(run.flat + i)] = value(0, run.flat + i);
        for (size_t b = 0; b < opts.back()->state().size(); ++b) {
          opts.back()->state()[b]->values[static_cast<size_t>(run.from + i)] = value(static_cast<int>(b) + 1, run.flat + i);
        }
      }
    }
  }
  TestWorld world(TransportKind::kLocal, kOld);
  const std::vector<absl::Status> taken = world.Run([&](int r, Transport* t) -> absl::Status {
    RingCollectives comm(t, CollectiveOptions{Env::Default()});
    ShardSource src;
    src.step = 40;
    src.rank = r;
    src.world = kOld;
    src.layout = &layout;
    src.params = params[static_cast<size_t>(r)].data();
    src.optimizer = opts[static_cast<size_t>(r)].get();
    src.position.set_next_step(40);
    return stores[static_cast<size_t>(r)]->TakeAndReplicate(src, /*copies=*/1, comm);
  });
  for (const absl::Status& s : taken) ASSERT_TRUE(s.ok()) << s;
  for (int r = 0; r < kNew; ++r) {
    MemorySnapshots fresh(Env::Default());
    for (int s = 0; s < kOld; ++s) {
      absl::StatusOr<std::string> bytes = stores[static_cast<size_t>(s)]->Bytes(SnapshotKey{40, kOld, s});
      ASSERT_TRUE(bytes.ok()) << bytes.status();
      ASSERT_TRUE(fresh.Put(SnapshotKey{40, kOld, s}, *bytes).ok());
    }
    std::unique_ptr<Optimizer> opt = *Optimizer::Create(AdamW(), layout, OwnedPieces(new_plan, r, kNew));
    std::vector<float> got(static_cast<size_t>(total), 0.0f);
    absl::StatusOr<Restored> at = fresh.Restore(40, kOld, layout, got.data(), opt.get());
    ASSERT_TRUE(at.ok()) << at.status();
    for (const PieceCopy& run : SharedRuns(opt->pieces(), {Range{0, total}})) {
      for (int64_t i = 0; i < run.size; ++i) {
        ASSERT_EQ(got[static_cast<size_t>(run.flat + i)], value(0, run.flat + i)) << "rank " << r;
        for (size_t b = 0; b < opt->state().size(); ++b) {
          ASSERT_EQ(opt->state()[b]->values[static_cast<size_t>(run.from + i)], value(static_cast<int>(b) + 1, run.flat + i))
              << opt->state()[b]->name << " rank " << r << " element " << run.flat + i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace shardline
