// Memory charged only where written: a PagedFloats made or resized costs nothing
// until written, ReleasePages gives back exactly the pages wholly inside
// its range (they read as zero after) and never a neighbour's byte, and
// ResidentBytes sees both.
#include "common/platform/page_memory.h"

#include <unistd.h>

#include <cstdint>
#include <utility>

#include <gtest/gtest.h>

namespace shardline {
namespace {

const int64_t kPage = sysconf(_SC_PAGESIZE);

TEST(PageMemoryTest, ABufferIsZeroAndChargedOnlyWhereWritten) {
  const size_t n = static_cast<size_t>(64 * kPage / sizeof(float));
  PagedFloats v(n);
  EXPECT_EQ(ResidentBytes(v.data(), n * sizeof(float)), 0) << "making the buffer touched its pages";
  v[0] = 1.0f;
  v[n / 2] = 2.0f;
  EXPECT_EQ(ResidentBytes(v.data(), n * sizeof(float)), 2 * kPage);
  v.resize(n);  // the same size: nothing changes
  EXPECT_EQ(v[n / 2], 2.0f);
  // Another size: zero again, and nothing charged.
  v.resize(n / 2);
  EXPECT_EQ(ResidentBytes(v.data(), v.size() * sizeof(float)), 0);
  for (float f : v) ASSERT_EQ(f, 0.0f);
  PagedFloats moved = std::move(v);
  EXPECT_EQ(moved.size(), n / 2);
  EXPECT_TRUE(v.empty());  // NOLINT: moved from, defined empty
}

TEST(PageMemoryTest, ReleaseGivesBackWholePagesInsideTheRangeOnly) {
  const size_t per_page = static_cast<size_t>(kPage) / sizeof(float);
  PagedFloats v(8 * per_page);
  for (float& f : v) f = 3.0f;
  EXPECT_EQ(ResidentBytes(v.data(), v.size() * sizeof(float)), 8 * kPage);
  // From the middle of page 1 to the middle of page 5: pages 2, 3 and 4 go.
  const size_t begin = per_page + per_page / 2, end = 5 * per_page + per_page / 2;
  ReleasePages(v.data() + begin, (end - begin) * sizeof(float));
  EXPECT_EQ(ResidentBytes(v.data(), v.size() * sizeof(float)), 5 * kPage);
  for (size_t i = 0; i < v.size(); ++i) {
    const bool released = i >= 2 * per_page && i < 5 * per_page;
    ASSERT_EQ(v[i], released ? 0.0f : 3.0f) << "element " << i;
  }
  // A range inside one page gives back nothing.
  ReleasePages(v.data() + 1, 16);
  EXPECT_EQ(v[1], 3.0f);
  EXPECT_GT(PeakRssBytes(), 0);
}

}  // namespace
}  // namespace shardline
