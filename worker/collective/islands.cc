#include "worker/collective/islands.h"

#include "absl/strings/str_cat.h"
#include "common/job/shard.h"

namespace shardline {

absl::StatusOr<IslandPlace> PlaceInIslands(int world_rank, int world, int islands) {
  if (islands < 1 || world % islands != 0) {
    return absl::InvalidArgumentError(absl::StrCat("collective.islands = ", islands,
                                                   " must divide the world's ", world, " workers"));
  }
  IslandPlace p;
  p.islands = islands;
  p.island_size = world / islands;
  p.island = IslandOfRank(world_rank, world, islands);
  p.island_rank = world_rank % p.island_size;
  p.world_rank = world_rank;
  p.world = world;
  return p;
}

std::vector<int> IslandMembers(const IslandPlace& p) {
  std::vector<int> m;
  const Range ranks = IslandRanks(p.island, p.world, p.islands);
  for (int64_t r = ranks.begin; r < ranks.end; ++r) m.push_back(static_cast<int>(r));
  return m;
}

std::vector<int> AcrossMembers(const IslandPlace& p) {
  std::vector<int> m;
  for (int i = 0; i < p.islands; ++i) m.push_back(i * p.island_size + p.island_rank);
  return m;
}

int64_t IslandBatch(const IslandPlace& p, int64_t global_batch) {
  int64_t n = 0;
  for (int g : IslandMembers(p)) n += ShardRange(global_batch, g, p.world).size();
  return n;
}

}  // namespace shardline
