#include "common/topology/peer_set.h"

#include <algorithm>
#include <random>
#include <set>
#include <vector>

#include "common/job/shard.h"
#include "gtest/gtest.h"
#include "common/topology/doubling_schedule.h"

namespace shardline {
namespace {

bool Has(const std::vector<int>& v, int x) { return std::binary_search(v.begin(), v.end(), x); }

// Every pair of ranks that talk must list each other: the sender needs the
// address, the receiver the sender's tag.
void ExpectSymmetric(const std::vector<std::vector<int>>& sets) {
  for (size_t a = 0; a < sets.size(); ++a) {
    for (int b : sets[a]) {
      EXPECT_TRUE(Has(sets[static_cast<size_t>(b)], static_cast<int>(a))) << a << " lists " << b << " but not back";
    }
  }
}

TEST(PeerSetTest, RingNeighboursAndDoublingPartnersAreListedAndLittleElse) {
  for (int n : {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 16, 17, 31, 32, 33, 40, 100, 1000, 4096}) {
    std::vector<std::vector<int>> sets;
    for (int r = 0; r < n; ++r) {
      std::vector<int> s = DataPlanePeers(r, n);
      EXPECT_TRUE(std::is_sorted(s.begin(), s.end()));
      EXPECT_FALSE(Has(s, r));
      if (n > 1) {
        EXPECT_TRUE(Has(s, (r + 1) % n)) << "N=" << n << " rank " << r;
        EXPECT_TRUE(Has(s, (r + n - 1) % n)) << "N=" << n << " rank " << r;
      }
      for (const DoublingStep& step : RecursiveDoublingSchedule(r, n)) {
        EXPECT_TRUE(Has(s, step.peer)) << "N=" << n << " rank " << r << " partner " << step.peer;
      }
      // Two neighbours and a partner per doubling round, at most.
      EXPECT_LE(static_cast<int>(s.size()), 2 + DoublingDepth(n)) << "N=" << n << " rank " << r;
      sets.push_back(std::move(s));
    }
    ExpectSymmetric(sets);
  }
}

TEST(PeerSetTest, EveryMoveOfAnInMemoryRestoreIsListedAtBothEnds) {
  std::mt19937 gen(7);
  for (int from = 1; from <= 12; ++from) {
    for (int n = 1; n <= 12; ++n) {
      for (int trial = 0; trial < 5; ++trial) {
        // A random bucket plan, as small as a few elements per rank.
        std::vector<Range> buckets;
        int64_t at = 0;
        const int count = 1 + static_cast<int>(gen() % 4);
        for (int b = 0; b < count; ++b) {
          const int64_t len = 1 + static_cast<int64_t>(gen() % 40);
          buckets.push_back(Range{at, at + len});
          at += len;
        }
        RestoreMoves moves;
        moves.from_world = from;
        for (int s = 0; s < from; ++s) moves.sources.push_back(static_cast<int>(gen() % static_cast<unsigned>(n)));
        std::vector<std::vector<int>> sets;
        for (int r = 0; r < n; ++r) sets.push_back(DataPlanePeers(r, n, moves));
        ExpectSymmetric(sets);
        // The moves worker/lifecycle makes (MoveMemoryShards).
        for (int s = 0; s < from; ++s) {
          const int source = moves.sources[static_cast<size_t>(s)];
          for (int r = 0; r < n; ++r) {
            if (r == source || SharedRuns(OwnedPieces(buckets, s, from), OwnedPieces(buckets, r, n)).empty()) continue;
            EXPECT_TRUE(Has(sets[static_cast<size_t>(source)], r))
                << "shard " << s << " of " << from << " moves from rank " << source << " to rank " << r << " of " << n;
          }
        }
      }
    }
  }
}

TEST(PeerSetTest, ShardsMayOverlapIsExactForOneLongBucket) {
  for (int from = 1; from <= 9; ++from) {
    for (int n = 1; n <= 9; ++n) {
      const std::vector<Range> one = {Range{0, int64_t{from} * n * 3}};
      for (int s = 0; s < from; ++s) {
        for (int r = 0; r < n; ++r) {
          const bool shared = !SharedRuns(OwnedPieces(one, s, from), OwnedPieces(one, r, n)).empty();
          EXPECT_EQ(ShardsMayOverlap(s, from, r, n), shared) << s << "/" << from << " vs " << r << "/" << n;
        }
      }
    }
  }
}

TEST(PeerSetTest, ARestoreInTheSameWorldAddsOnlyEachShardsSource) {
  const int n = 64;
  RestoreMoves moves;
  moves.from_world = n;
  for (int s = 0; s < n; ++s) moves.sources.push_back((s + 7) % n);  // shard s held by rank s+7
  for (int r = 0; r < n; ++r) {
    std::vector<int> plain = DataPlanePeers(r, n), with = DataPlanePeers(r, n, moves);
    std::set<int> extra(with.begin(), with.end());
    for (int p : plain) extra.erase(p);
    std::set<int> want = {(r + 7) % n, (r - 7 + n) % n};  // receives from r+7, sends to r-7
    for (int p : plain) want.erase(p);
    EXPECT_EQ(extra, want) << "rank " << r;
  }
}

// Islands (collective.islands): every ring and doubling partner of the
// rank's island and of its group across islands, as the island rings use
// them (worker/collective/island_rings.h), in every shape of world - the
// 6-worker job of 2 islands of 3 once found rank 3 missing from rank 5's.
TEST(PeerSetTest, IslandsListTheirRingsAndThoseAcross) {
  for (int n : {2, 4, 6, 8, 9, 12, 16, 24, 30}) {
    for (int m = 1; m <= n; ++m) {
      if (n % m != 0) continue;
      std::vector<std::vector<int>> sets;
      for (int r = 0; r < n; ++r) sets.push_back(DataPlanePeers(r, n, {}, m));
      ExpectSymmetric(sets);
      for (int r = 0; r < n; ++r) {
        const std::vector<int>& s = sets[static_cast<size_t>(r)];
        const int island = r / m, place = r % m, k = n / m;
        std::vector<int> want;
        if (m > 1) {
          want.push_back(island * m + (place + 1) % m);
          want.push_back(island * m + (place + m - 1) % m);
          for (const DoublingStep& step : RecursiveDoublingSchedule(place, m)) want.push_back(island * m + step.peer);
        }
        if (k > 1) {
          want.push_back(((island + 1) % k) * m + place);
          want.push_back(((island + k - 1) % k) * m + place);
          for (const DoublingStep& step : RecursiveDoublingSchedule(island, k)) want.push_back(step.peer * m + place);
        }
        for (int p : want) {
          if (p != r) {
            EXPECT_TRUE(Has(s, p)) << "N=" << n << " islands of " << m << ": rank " << r << " lacks " << p;
          }
        }
      }
    }
  }
}

// A restore inside islands: island i of the new world reads island
// i mod K of the snapshot's, at the same place; every move is listed at
// both ends, and a shard no island reads (source -1) moves nowhere.
TEST(PeerSetTest, EveryMoveOfARestoreOfIslandsIsListedAtBothEnds) {
  std::mt19937 gen(11);
  const int m = 2;
  for (int from_islands = 1; from_islands <= 4; ++from_islands) {
    for (int islands = 1; islands <= 4; ++islands) {
      const int from = from_islands * m, n = islands * m;
      RestoreMoves moves;
      moves.from_world = from;
      for (int s = 0; s < from; ++s) {
        const bool read = s / m < islands;  // islands past the new count are read by none
        moves.sources.push_back(read ? static_cast<int>(gen() % static_cast<unsigned>(n)) : -1);
      }
      std::vector<std::vector<int>> sets;
      for (int r = 0; r < n; ++r) sets.push_back(DataPlanePeers(r, n, moves, m));
      ExpectSymmetric(sets);
      for (int r = 0; r < n; ++r) {
        const int s = ((r / m) % from_islands) * m + r % m;
        EXPECT_TRUE(RestoreMayMove(s, from, r, n, m));
        const int source = moves.sources[static_cast<size_t>(s)];
        ASSERT_GE(source, 0) << "shard " << s << " is read by rank " << r;
        if (source != r) {
          EXPECT_TRUE(Has(sets[static_cast<size_t>(source)], r)) << s << " -> " << r;
        }
        for (int other = 0; other < from; ++other) {
          if (other != s) {
            EXPECT_FALSE(RestoreMayMove(other, from, r, n, m)) << other << " -> " << r;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace shardline
