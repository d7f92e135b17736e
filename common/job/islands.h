// Islands as a job runs them (collective.islands, collective.diloco,
// runtime.min_islands): pure functions of the config and a generation's
// world size, the same on the coordinator and every worker.
#ifndef SHARDLINE_COMMON_JOB_ISLANDS_H_
#define SHARDLINE_COMMON_JOB_ISLANDS_H_

#include <algorithm>

#include "proto/config.pb.h"

namespace shardline {

// The job takes outer steps: islands above 1, or collective.diloco set on
// one island (Lookahead). A world of islands shrunk to one keeps taking
// them, so its outer state goes on.
inline bool DilocoOn(const config::JobConfig& c) {
  return c.collective().islands() > 1 || c.collective().has_diloco();
}

// The workers of an island: runtime.num_workers / collective.islands. An
// island-elastic world (runtime.min_islands) is always whole islands.
inline int IslandSize(const config::JobConfig& c) {
  return std::max(1, c.runtime().num_workers() / std::max(1, c.collective().islands()));
}

// The islands of a generation whose world has `world_size` workers: all
// of collective.islands in a full world, fewer in a world shrunk by
// runtime.min_islands (at least 1).
inline int WorldIslands(const config::JobConfig& c, int world_size) {
  return std::max(1, world_size / IslandSize(c));
}

}  // namespace shardline

#endif  // SHARDLINE_COMMON_JOB_ISLANDS_H_
