#include "common/topology/peer_set.h"

#include <algorithm>
#include <cstdint>

#include "common/topology/doubling_schedule.h"

namespace shardline {

bool ShardsMayOverlap(int s, int from_world, int r, int world) {
  // s/f < (r+1)/n and r/n < (s+1)/f, in integers.
  const int64_t f = from_world, n = world;
  return int64_t{s} * n < (int64_t{r} + 1) * f && int64_t{r} * f < (int64_t{s} + 1) * n;
}

std::vector<int> DataPlanePeers(int rank, int world, const RestoreMoves& restore) {
  std::vector<int> out;
  if (world <= 1) return out;
  out.push_back((rank + 1) % world);
  out.push_back((rank + world - 1) % world);
  for (const DoublingStep& step : RecursiveDoublingSchedule(rank, world)) out.push_back(step.peer);
  const int from = restore.from_world;
  for (int s = 0; s < from && s < static_cast<int>(restore.sources.size()); ++s) {
    const int source = restore.sources[static_cast<size_t>(s)];
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
