// The ranks one rank exchanges data-plane frames with in one generation.
//
// This is the contract between the coordinator, which hands each rank the
// addresses and member tags of exactly these ranks (and no others: an
// answer stays O(log N) in a world of thousands), and the collectives, which
// send to and accept streams from no other rank:
//   - the ring's neighbours, rank - 1 and rank + 1 (reduce-scatter,
//     all-gather, broadcast, in-memory snapshot replication);
//   - the recursive-doubling partners (doubling_schedule.h: small all-reduces
//     and the per-step scalars);
//   - for a restore from in-memory snapshots, the moves of the restore plan:
//     shard s of the snapshot's world goes from rank sources[s] to every rank
//     whose shard can overlap it (worker/lifecycle restores exactly those);
//   - in a world of islands (collective.islands: islands of island_size
//     consecutive ranks), the same inside the rank's island (its ring and
//     doubling partners, as a world of its own) and inside the group across
//     islands of the ranks with its place in their island.
// A collective that needs another rank must be added here first; the
// transport refuses to reach a rank it has no address for, and refuses
// streams from a rank it has no tag for, naming both ranks.
#ifndef SHARDLINE_COMMON_TOPOLOGY_PEER_SET_H_
#define SHARDLINE_COMMON_TOPOLOGY_PEER_SET_H_

#include <vector>

namespace shardline {

// A restore from the members' in-memory snapshots (RegisterResponse's
// memory_sources and memory_world_size).
struct RestoreMoves {
  // The world the snapshot was taken in; 0 when there is no such restore.
  int from_world = 0;
  // sources[s]: the rank of this world that sends shard s (from_world of
  // them); -1 for a shard no rank reads (islands: of an island no island of
  // this world restores from).
  std::vector<int> sources;
};

// True if shard `s` of `from_world` and shard `r` of `world` can share an
// element under any bucket plan: each bucket is cut by ShardRange
// (common/job/shard.h), whose chunks overlap only where the real intervals
// [s/from_world, (s+1)/from_world) and [r/world, (r+1)/world) do.
bool ShardsMayOverlap(int s, int from_world, int r, int world);

// In a world of islands of `island_size` ranks (the same in both worlds):
// whether rank r of `world` reads shard s of `from_world` in a restore - the
// same place in the island, of the island r's island restores from, island
// i of the new world reading island i mod (from_world / island_size) of the
// old (IslandSource, common/job/shard.h). Without islands
// (island_size 0): ShardsMayOverlap.
bool RestoreMayMove(int s, int from_world, int r, int world, int island_size);

// The ranks `rank` of `world` talks to, ascending, without itself.
// island_size > 0: the world is islands of that many ranks (a world of one
// island of all ranks is the same as none).
std::vector<int> DataPlanePeers(int rank, int world, const RestoreMoves& restore = {}, int island_size = 0);

}  // namespace shardline

#endif  // SHARDLINE_COMMON_TOPOLOGY_PEER_SET_H_
