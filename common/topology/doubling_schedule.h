// The schedule of a recursive-doubling all-reduce (Thakur, Rabenseifner &
// Gropp, "Optimization of collective communication operations in MPICH"),
// the log-depth algorithm shardline uses for small messages: ceil(log2 N)
// exchange rounds instead of the ring's 2(N-1) steps.
//
// With P the largest power of two <= N and E = N - P:
//   1. each extra rank r >= P sends its values to r - P and waits;
//      ranks r < E fold them in: v = v (+) v[r + P];
//   2. ranks r < P run log2 P rounds: with partner p = r ^ 2^k, both send
//      their partial sum and both compute lower (+) upper, the partial of
//      the group of lower ranks first, so partners hold the same bits;
//   3. ranks r < E send the result to r + P.
// Every rank ends with the same bits: a fixed function of N and the inputs.
//
//   for (const DoublingStep& s : RecursiveDoublingSchedule(rank, n)) ...
#ifndef SHARDLINE_COMMON_TOPOLOGY_DOUBLING_SCHEDULE_H_
#define SHARDLINE_COMMON_TOPOLOGY_DOUBLING_SCHEDULE_H_

#include <vector>

namespace shardline {

struct DoublingStep {
  enum Kind {
    kSendValues,    // an extra rank: send my values to `peer` (step 1)
    kFoldExtra,     // receive `peer`'s values and fold them in after mine (step 1)
    kExchange,      // send my partial to `peer`, receive its, combine (step 2)
    kSendResult,    // send the final values to extra rank `peer` (step 3)
    kReceiveResult  // an extra rank: the final values from `peer` (step 3)
  };
  Kind kind;
  int peer;
  // Numbers the message: 0 for step 1, 1..log2 P for the rounds, then
  // log2 P + 1 for step 3. Both ends of a message agree on it.
  int round;
  // kExchange: true if my partial is the lower group's (combined first).
  bool mine_first = true;
};

// Rank `rank`'s steps in a world of `world` >= 1 ranks, in order. Empty for
// a world of one.
std::vector<DoublingStep> RecursiveDoublingSchedule(int rank, int world);

// How many message latencies one all-reduce takes end to end: log2 P, plus
// 2 (steps 1 and 3) when N is not a power of two.
int DoublingDepth(int world);

}  // namespace shardline

#endif  // SHARDLINE_COMMON_TOPOLOGY_DOUBLING_SCHEDULE_H_
