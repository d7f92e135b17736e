// How a flat buffer of `total` elements is cut among `world` ranks. Used
// for ZeRO parameter/optimizer ownership and by the ring collectives'
// chunks, so both always agree on who owns what.
//
// The buffer is cut into buckets (contiguous ranges tiling [0, total) in
// order; worker/model/bucket_plan.h cuts them along tensor boundaries), and
// each bucket into `world` chunks with ShardRange. Rank r owns chunk r of
// every bucket: its pieces. A reduce-scatter of one bucket leaves each rank
// the sums of its piece of that bucket, so every bucket's collective is
// balanced across the ranks. With one bucket, a rank's single piece is
// ShardRange(total, r, world).
#ifndef SHARDLINE_COMMON_JOB_SHARD_H_
#define SHARDLINE_COMMON_JOB_SHARD_H_

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/types/span.h"

namespace shardline {

// A half-open range [begin, end) of element indices.
struct Range {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
  bool empty() const { return end <= begin; }
  bool operator==(const Range& o) const { return begin == o.begin && end == o.end; }
};

// The indices in both `a` and `b`; empty() if none.
inline Range Overlap(const Range& a, const Range& b) {
  return Range{a.begin > b.begin ? a.begin : b.begin, a.end < b.end ? a.end : b.end};
}

// The first and last of `buckets` (non-empty, tiling a buffer in ascending
// order) that `r` lies in: the buckets a layer or a tensor needs.
inline std::pair<size_t, size_t> BucketsOf(const std::vector<Range>& buckets, Range r) {
  size_t lo = 0;
  while (lo + 1 < buckets.size() && buckets[lo].end <= r.begin) ++lo;
  size_t hi = lo;
  while (hi + 1 < buckets.size() && buckets[hi + 1].begin < r.end) ++hi;
  return {lo, hi};
}

// Islands (collective.islands): `world` ranks cut into `islands` blocks of
// world / islands consecutive ranks (islands must divide world). The island
// of world rank `rank`, and the world ranks of island `island`.
inline int IslandOfRank(int rank, int world, int islands) { return rank / (world / islands); }
inline Range IslandRanks(int island, int world, int islands) {
  const int size = world / islands;
  return Range{int64_t{island} * size, int64_t{island + 1} * size};
}
// The island of a checkpoint or snapshot of `islands` that island `island`
// of a restoring world reads (runtime.min_islands: a world that lost
// islands reads its own; a returning one, past the checkpoint's count,
// reads island `island` mod `islands`).
inline int IslandSource(int island, int islands) { return islands > 0 ? island % islands : 0; }

// Shard `rank` of `world` (0 <= rank < world): [floor(rank*total/world),
// floor((rank+1)*total/world)). Shard sizes differ by at most one; shards
// tile [0, total) in rank order; empty shards occur when total < world.
inline Range ShardRange(int64_t total, int rank, int world) {
  return Range{total * rank / world, total * (rank + 1) / world};
}

// Rank `rank`'s piece of one bucket: ShardRange of its size, shifted to its
// start (may be empty).
inline Range OwnedPiece(const Range& bucket, int rank, int world) {
  const Range chunk = ShardRange(bucket.size(), rank, world);
  return Range{bucket.begin + chunk.begin, bucket.begin + chunk.end};
}

// The pieces rank `rank` of `world` owns: ShardRange of each bucket, in
// bucket order, empty ones left out. `buckets` tile a range in order.
std::vector<Range> OwnedPieces(absl::Span<const Range> buckets, int rank, int world);

// Elements in all of `pieces`.
int64_t PiecesSize(absl::Span<const Range> pieces);

// A buffer holding the elements of some pieces one after the other (a
// shard's optimizer state, or a checkpoint shard's buffers) is "packed";
// an element's packed offset is its position in that concatenation.
//
// One run of elements that two sets of pieces share: `size` elements at
// packed offset `from` of the first and `to` of the second, starting at
// flat index `flat`.
struct PieceCopy {
  int64_t flat = 0;
  int64_t from = 0;
  int64_t to = 0;
  int64_t size = 0;
};

// Every run of elements in both `from` and `to` (each ascending and
// non-overlapping), in ascending flat order.
std::vector<PieceCopy> SharedRuns(absl::Span<const Range> from, absl::Span<const Range> to);

}  // namespace shardline

#endif  // SHARDLINE_COMMON_JOB_SHARD_H_
