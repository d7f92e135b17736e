// The two rings of a rank in a world of islands (collective.islands;
// docs/collectives.md "Islands"), over the generation's one transport:
// its island's, where every step's collectives run, and the one across
// islands that joins it to the ranks owning the same pieces in every other
// island, where only outer steps run.
//
//   ASSIGN_OR_RETURN(IslandRings rings, IslandRings::Create(transport.get(), ShapeIslands(cfg, world), options));
//   RunTraining(cfg, data, *rings.island, ...);   // options.island_rings = &rings
#ifndef SHARDLINE_WORKER_COLLECTIVE_ISLAND_RINGS_H_
#define SHARDLINE_WORKER_COLLECTIVE_ISLAND_RINGS_H_

#include <memory>

#include "absl/status/statusor.h"
#include "common/job/islands.h"
#include "worker/collective/islands.h"
#include "worker/collective/ring.h"
#include "worker/collective/subgroup_transport.h"

namespace shardline {

struct IslandRings {
  // `transport` (the world's, of shape.world ranks) outlives the rings.
  // InvalidArgument if shape.islands does not divide the world or the
  // shape takes no outer steps.
  static absl::StatusOr<IslandRings> Create(Transport* transport, const IslandShape& shape,
                                            const CollectiveOptions& options);

  IslandShape shape;
  IslandPlace place;
  std::unique_ptr<SubgroupTransport> island_transport;
  std::unique_ptr<SubgroupTransport> across_transport;
  std::unique_ptr<RingCollectives> island;
  std::unique_ptr<RingCollectives> across;
};

}  // namespace shardline

#endif  // SHARDLINE_WORKER_COLLECTIVE_ISLAND_RINGS_H_
