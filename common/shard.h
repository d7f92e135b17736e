// How a flat buffer of `total` elements is cut into `world` contiguous
// shards. Used for ZeRO parameter/optimizer ownership and by the ring
// collectives' chunks, so both always agree on who owns what.
#ifndef SHARDLINE_COMMON_SHARD_H_
#define SHARDLINE_COMMON_SHARD_H_

#include <cstdint>

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

// Shard `rank` of `world` (0 <= rank < world): [floor(rank*total/world),
// floor((rank+1)*total/world)). Shard sizes differ by at most one; shards
// tile [0, total) in rank order; empty shards occur when total < world.
inline Range ShardRange(int64_t total, int rank, int world) {
  return Range{total * rank / world, total * (rank + 1) / world};
}

}  // namespace shardline

#endif  // SHARDLINE_COMMON_SHARD_H_
