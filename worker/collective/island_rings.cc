#include "worker/collective/island_rings.h"

#include "absl/strings/str_cat.h"
#include "common/platform/status_macros.h"

namespace shardline {
namespace {

// Tag spaces (subgroup_transport.h): 0 is the world's own ring.
constexpr int kIslandSpace = 1;
constexpr int kAcrossSpace = 2;

}  // namespace

absl::StatusOr<IslandRings> IslandRings::Create(Transport* transport, const IslandShape& shape,
                                                const CollectiveOptions& options) {
  if (!shape.outer_steps || shape.world != transport->world_size()) {
    return absl::InvalidArgumentError(absl::StrCat("island rings for a shape of ", shape.world, " workers ",
                                                   shape.outer_steps ? "" : "without outer steps ", "over a world of ",
                                                   transport->world_size()));
  }
  IslandRings r;
  r.shape = shape;
  ASSIGN_OR_RETURN(r.place, PlaceInIslands(transport->rank(), transport->world_size(), shape.islands));
  ASSIGN_OR_RETURN(r.island_transport, SubgroupTransport::Create(transport, IslandMembers(r.place), kIslandSpace));
  ASSIGN_OR_RETURN(r.across_transport, SubgroupTransport::Create(transport, AcrossMembers(r.place), kAcrossSpace));
  r.island = std::make_unique<RingCollectives>(r.island_transport.get(), options);
  // The pseudo-gradients always travel in float32 (collective.bf16_gradients
  // is the island's reduce-scatter only).
  CollectiveOptions across = options;
  across.bf16_reduce_scatter = false;
  r.across = std::make_unique<RingCollectives>(r.across_transport.get(), across);
  return r;
}

}  // namespace shardline
