// The recursive-doubling schedule on its own: at every world size every
// message sent is received once, nothing deadlocks, every rank ends with
// every rank's contribution exactly once and with the same bits, in about
// log2 N steps.
#include "common/topology/doubling_schedule.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "tests/common/topology/doubling_sim.h"

namespace shardline {
namespace {

TEST(DoublingScheduleTest, EveryRankEndsWithEveryContributionOnce) {
  for (int n = 1; n <= 40; ++n) {
    SCOPED_TRACE("world " + std::to_string(n));
    std::vector<std::vector<int>> inputs(n, std::vector<int>(n, 0));
    for (int r = 0; r < n; ++r) inputs[r][r] = 1;
    const std::vector<std::vector<int>> out =
        SimulateDoubling<std::vector<int>>(inputs, [](const std::vector<int>& a, const std::vector<int>& b) {
          std::vector<int> c(a.size());
          for (size_t i = 0; i < a.size(); ++i) c[i] = a[i] + b[i];
          return c;
        });
    ASSERT_EQ(out.size(), static_cast<size_t>(n)) << "deadlock or a message left unreceived";
    for (int r = 0; r < n; ++r) EXPECT_EQ(out[r], std::vector<int>(n, 1)) << "rank " << r;
  }
}

TEST(DoublingScheduleTest, PartnersCombineInOneOrderSoEveryRankHasTheSameBits) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> u(-1e3, 1e3);
  for (int n = 2; n <= 33; ++n) {
    std::vector<double> inputs(n);
    for (double& v : inputs) v = u(rng);
    const std::vector<double> out =
        SimulateDoubling<double>(inputs, [](const double& lo, const double& hi) { return lo + hi; });
    ASSERT_EQ(out.size(), static_cast<size_t>(n));
    for (int r = 1; r < n; ++r) EXPECT_EQ(std::memcmp(&out[r], &out[0], sizeof(double)), 0) << "world " << n << " rank " << r;
  }
}

TEST(DoublingScheduleTest, DepthIsLogarithmic) {
  EXPECT_EQ(DoublingDepth(1), 0);
  EXPECT_EQ(DoublingDepth(2), 1);
  EXPECT_EQ(DoublingDepth(3), 3);  // fold, one round, result
  EXPECT_EQ(DoublingDepth(4), 2);
  EXPECT_EQ(DoublingDepth(16), 4);
  EXPECT_EQ(DoublingDepth(4096), 12);
  for (int n = 1; n <= 40; ++n) {
    for (int r = 0; r < n; ++r) {
      EXPECT_LE(static_cast<int>(RecursiveDoublingSchedule(r, n).size()), DoublingDepth(n)) << n << " " << r;
    }
  }
}

}  // namespace
}  // namespace shardline
