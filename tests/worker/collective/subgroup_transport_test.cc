// Groups of a world over one transport: an island's ring and the ring across
// islands reduce what they should, in parallel, without taking each
// other's messages; bad groups are refused.
#include "worker/collective/subgroup_transport.h"

#include <gtest/gtest.h>

#include <vector>

#include "tests/worker/collective/world.h"
#include "worker/collective/island_rings.h"
#include "worker/collective/local_transport.h"

namespace shardline {
namespace {

TEST(IslandsTest, PlacesAreBlocksOfConsecutiveRanks) {
  absl::StatusOr<IslandPlace> p = PlaceInIslands(5, 6, 3);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->island, 2);
  EXPECT_EQ(p->island_rank, 1);
  EXPECT_EQ(IslandMembers(*p), (std::vector<int>{4, 5}));
  EXPECT_EQ(AcrossMembers(*p), (std::vector<int>{1, 3, 5}));
  EXPECT_EQ(IslandBatch(*p, 100), 34);  // ranks 4 and 5 of 6: [66, 83) and [83, 100)
  EXPECT_FALSE(PlaceInIslands(0, 6, 4).ok());
}

TEST(SubgroupTransportTest, BadGroupsAreRefused) {
  LocalFabric fabric(4);
  std::unique_ptr<Transport> t = fabric.Connect(1);
  EXPECT_FALSE(SubgroupTransport::Create(t.get(), {0, 2}, 1).ok());     // not a member
  EXPECT_FALSE(SubgroupTransport::Create(t.get(), {1, 1}, 1).ok());     // twice
  EXPECT_FALSE(SubgroupTransport::Create(t.get(), {1, 4}, 1).ok());     // outside the world
  EXPECT_FALSE(SubgroupTransport::Create(t.get(), {0, 1}, 0).ok());     // the world's own space
  EXPECT_FALSE(SubgroupTransport::Create(t.get(), {0, 1}, 8).ok());
  absl::StatusOr<std::unique_ptr<SubgroupTransport>> g = SubgroupTransport::Create(t.get(), {3, 1}, 2);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ((*g)->rank(), 1);
  EXPECT_EQ((*g)->world_size(), 2);
  EXPECT_EQ((*g)->world_rank(0), 3);
}

IslandShape ThreeIslandsOfTwo() {
  IslandShape s;
  s.outer_steps = true;
  s.islands = 3;
  s.island_size = 2;
  s.world = 6;
  s.inner_steps = 1;
  return s;
}

// 6 ranks in 3 islands of 2: each island all-reduces its own values while
// the rings across islands all-reduce theirs, interleaved op by op.
TEST(SubgroupTransportTest, IslandAndAcrossRingsReduceTheirOwnMembers) {
  TestWorld world(TransportKind::kLocal, 6);
  CollectiveOptions options{Env::Default()};
  options.max_segment_bytes = 16;  // several segments
  std::vector<absl::Status> s = world.Run([&](int rank, Transport* t) -> absl::Status {
    absl::StatusOr<IslandRings> rings = IslandRings::Create(t, ThreeIslandsOfTwo(), options);
    if (!rings.ok()) return rings.status();
    for (int round = 0; round < 3; ++round) {
      std::vector<float> in(37, static_cast<float>(rank + 1)), across(37, static_cast<float>(10 * (rank + 1)));
      if (absl::Status st = rings->island->AllReduce(absl::MakeSpan(in)); !st.ok()) return st;
      if (absl::Status st = rings->across->AllReduce(absl::MakeSpan(across)); !st.ok()) return st;
      const int island = rank / 2, me = rank % 2;
      const float island_sum = static_cast<float>((2 * island + 1) + (2 * island + 2));
      const float across_sum = static_cast<float>(10 * ((me + 1) + (me + 3) + (me + 5)));
      for (float v : in) EXPECT_EQ(v, island_sum) << "rank " << rank;
      for (float v : across) EXPECT_EQ(v, across_sum) << "rank " << rank;
    }
    return absl::OkStatus();
  });
  for (int r = 0; r < 6; ++r) EXPECT_TRUE(s[static_cast<size_t>(r)].ok()) << r << ": " << s[static_cast<size_t>(r)];
}

}  // namespace
}  // namespace shardline
