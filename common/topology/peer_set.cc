#include "common/topology/peer_set.h"

#include <algorithm>
#include <cstdint>

#include "common/job/shard.h"
#include "common/topology/doubling_schedule.h"

namespace shardline {

bool ShardsMayOverlap(int s, int from_world, int r, int world) {
  // s/f < (r+1)/n and r/n < (s+1)/f, in integers.
  const int64_t f = from_world, n = world;
  return int64_t{s} * n < (int64_t{r} + 1) * f && int64_t{r} * f < (int64_t{s} + 1) * n;
}

namespace {

// The ring neighbours and doubling partners of member `index` of a group
// of `size`, as world ranks: member j is first + j * stride.
void AddGroupPeers(int index, int size, int first, int stride, std::vector<int>* out) {
  if (size <= 1) return;
  auto rank = [&](int j) { return first + j * stride; };
  out->push_back(rank((index + 1) % size));
  out->push_back(rank((index + size - 1) % size));
  for (const DoublingStep& step : RecursiveDoublingSchedule(index, size)) out->push_back(rank(step.peer));
}

bool HasIslands(int world, int island_size) {
  return island_size > 0 && island_size < world && world % island_size == 0;
}

// The shard of a snapshot of `from_world` that rank `rank` reads in a
// restore inside islands of `m`: its place, in its island's source.
int ReadShard(int rank, int from_world, int m) {
  return IslandSource(rank / m, std::max(1, from_world / m)) * m + rank % m;
}

}  // namespace

bool RestoreMayMove(int s, int from_world, int r, int world, int island_size) {
  if (island_size <= 0) return ShardsMayOverlap(s, from_world, r, world);
  return s == ReadShard(r, from_world, island_size);
}

std::vector<int> DataPlanePeers(int rank, int world, const RestoreMoves& restore, int island_size) {
  std::vector<int> out;
  if (world <= 1) return out;
  out.push_back((rank + 1) % world);
  out.push_back((rank + world - 1) % world);
  for (const DoublingStep& step : RecursiveDoublingSchedule(rank, world)) out.push_back(step.peer);
  if (HasIslands(world, island_size)) {
    const int m = island_size, island = rank / m, place = rank % m;
    AddGroupPeers(place, m, island * m, 1, &out);       // the island's ring
    AddGroupPeers(island, world / m, place, m, &out);   // the ring across islands
  }
  const int from = restore.from_world;
  const int sources = std::min(from, static_cast<int>(restore.sources.size()));
  if (island_size > 0 && sources > 0) {  // a restore inside islands (RestoreMayMove)
    const int m = island_size, from_islands = std::max(1, from / m), islands = std::max(1, world / m);
    const int mine = ReadShard(rank, from, m);  // the one shard this rank reads
    if (mine < sources && restore.sources[static_cast<size_t>(mine)] >= 0) {
      out.push_back(restore.sources[static_cast<size_t>(mine)]);
    }
    for (int s = 0; s < sources; ++s) {  // the ranks reading the shards it sends
      if (restore.sources[static_cast<size_t>(s)] != rank) continue;
      for (int i = s / m; i < islands; i += from_islands) out.push_back(i * m + s % m);
    }
  }
  for (int s = 0; island_size <= 0 && s < from && s < static_cast<int>(restore.sources.size()); ++s) {
    const int source = restore.sources[static_cast<size_t>(s)];
    if (source < 0) continue;
    if (source == rank) {
      // The receivers of shard s: a run of ranks around s * world / from.
      const int first = static_cast<int>(int64_t{s} * world / from);
      for (int r = std::max(0, first - 1); r < world; ++r) {
        if (ShardsMayOverlap(s, from, r, world)) {
          out.push_back(r);
        } else if (r > first) {
          break;
        }
      }
    } else if (ShardsMayOverlap(s, from, rank, world)) {
      out.push_back(source);
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  out.erase(std::remove(out.begin(), out.end(), rank), out.end());
  return out;
}

}  // namespace shardline
