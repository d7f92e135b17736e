// Where a rank stands in a world cut into islands (collective.islands,
// docs/collectives.md "Islands"): pure arithmetic, the same on every rank.
#ifndef SHARDLINE_WORKER_COLLECTIVE_ISLANDS_H_
#define SHARDLINE_WORKER_COLLECTIVE_ISLANDS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace shardline {

// The islands of a world of `world` ranks cut into `islands` blocks of
// world / islands consecutive ranks: island i is ranks [i*M, (i+1)*M).
struct IslandPlace {
  int island = 0;        // this rank's island
  int islands = 1;       // K
  int island_rank = 0;   // its rank inside the island
  int island_size = 1;   // M = world / K
  int world_rank = 0;
  int world = 1;
};
// InvalidArgument if `islands` does not divide `world`.
absl::StatusOr<IslandPlace> PlaceInIslands(int world_rank, int world, int islands);
// The world ranks of `place`'s island, and of the ring across islands that
// joins the ranks with its island_rank (one per island).
std::vector<int> IslandMembers(const IslandPlace& place);
std::vector<int> AcrossMembers(const IslandPlace& place);
// The examples of a global batch of `global_batch` that `place`'s island
// reads in a step (its ranks' slices: common/job/shard.h ShardRange).
int64_t IslandBatch(const IslandPlace& place, int64_t global_batch);

}  // namespace shardline

#endif  // SHARDLINE_WORKER_COLLECTIVE_ISLANDS_H_
