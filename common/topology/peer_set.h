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
//     whose shard can overlap it (worker/lifecycle restores exactly those).
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
  // sources[s]: the rank of this world that sends shard s (from_world of them).
  std::vector<int> sources;
};

// True if shard `s` of `from_world` and shard `r` of `world` can share an
// element under any bucket plan: each bucket is cut by ShardRange
// (common/job/shard.h), whose chunks overlap only where the real intervals
// [s/from_world, (s+1)/from_world) and [r/world, (r+1)/world) do.
bool ShardsMayOverlap(int s, int from_world, int r, int world);

// The ranks `rank` of `world` talks to, ascending, without itself.
std::vector<int> DataPlanePeers(int rank, int world, const RestoreMoves& restore = {});

}  // namespace shardline

#endif  // SHARDLINE_COMMON_TOPOLOGY_PEER_SET_H_
