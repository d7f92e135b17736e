// Islands as a job runs them (collective.islands, collective.diloco,
// runtime.min_islands; docs/collectives.md "Islands"): one IslandShape made
// from the config and a generation's world size, the same on the
// coordinator and every worker, and passed to whatever asks "is this an
// island job, and how is it cut".
#ifndef SHARDLINE_COMMON_JOB_ISLANDS_H_
#define SHARDLINE_COMMON_JOB_ISLANDS_H_

#include <cstdint>

#include "proto/config.pb.h"

namespace shardline {

struct IslandShape {
  // The job takes outer steps: collective.islands above 1, or
  // collective.diloco set on one island (Lookahead). A world of islands
  // shrunk to one keeps taking them, so its outer state goes on.
  bool outer_steps = false;
  // The islands of this generation: all of collective.islands in a full
  // world, fewer in a world shrunk by runtime.min_islands (at least 1); 1
  // without outer steps.
  int islands = 1;
  // The workers of an island: runtime.num_workers / collective.islands (an
  // island-elastic world is always whole islands); the world without
  // outer steps.
  int island_size = 1;
  int world = 1;
  int inner_steps = 0;  // collective.diloco.inner_steps; 0 without outer steps

  // After `steps_done` of `total` steps, whether an outer step is due:
  // every inner_steps steps, and after the last. Never without outer steps.
  bool OuterDue(int64_t steps_done, int64_t total) const {
    return outer_steps && (steps_done % inner_steps == 0 || steps_done == total);
  }
  // The ranks the parameters and optimizer state are sharded over: an
  // island's with outer steps, the world's without.
  int ShardWorld() const { return world % islands == 0 ? world / islands : world; }
  // What a registration reports as the island size: 0 without outer steps.
  int RegisteredIslandSize() const { return outer_steps ? island_size : 0; }
};

// The shape of a generation of `world_size` workers under config `c`.
// c must be valid (ValidateConfig: islands divide num_workers, inner_steps
// positive).
IslandShape ShapeIslands(const config::JobConfig& c, int world_size);

}  // namespace shardline

#endif  // SHARDLINE_COMMON_JOB_ISLANDS_H_
