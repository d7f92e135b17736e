#include "common/job/islands.h"

#include <algorithm>

namespace shardline {

IslandShape ShapeIslands(const config::JobConfig& c, int world_size) {
  IslandShape s;
  s.world = std::max(1, world_size);
  s.outer_steps = c.collective().islands() > 1 || c.collective().has_diloco();
  if (!s.outer_steps) {
    s.island_size = s.world;
    return s;
  }
  s.island_size = std::max(1, c.runtime().num_workers() / std::max(1, c.collective().islands()));
  s.islands = std::max(1, s.world / s.island_size);
  s.inner_steps = std::max(1, c.collective().diloco().inner_steps());
  return s;
}

}  // namespace shardline
