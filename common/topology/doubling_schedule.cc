#include "common/topology/doubling_schedule.h"

namespace shardline {
namespace {

int LargestPowerOfTwoAtMost(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

int Log2(int p) {
  int k = 0;
  while ((1 << k) < p) ++k;
  return k;
}

}  // namespace

std::vector<DoublingStep> RecursiveDoublingSchedule(int rank, int world) {
  std::vector<DoublingStep> steps;
  if (world <= 1) return steps;
  const int p = LargestPowerOfTwoAtMost(world);
  const int extra = world - p;
  const int last_round = Log2(p) + 1;
  if (rank >= p) {
    steps.push_back({DoublingStep::kSendValues, rank - p, 0});
    steps.push_back({DoublingStep::kReceiveResult, rank - p, last_round});
    return steps;
  }
  if (rank < extra) steps.push_back({DoublingStep::kFoldExtra, rank + p, 0});
  for (int mask = 1, round = 1; mask < p; mask <<= 1, ++round) {
    const int partner = rank ^ mask;
    steps.push_back({DoublingStep::kExchange, partner, round, rank < partner});
  }
  if (rank < extra) steps.push_back({DoublingStep::kSendResult, rank + p, last_round});
  return steps;
}

int DoublingDepth(int world) {
  if (world <= 1) return 0;
  const int p = LargestPowerOfTwoAtMost(world);
  return Log2(p) + (world > p ? 2 : 0);
}

}  // namespace shardline
