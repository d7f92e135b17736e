// Pages that move between ranges (common/platform/page_pool.h): a range
// taken holds the pool's pages (written pages show up in it as they were
// left, no fresh page is faulted in), a range given back reads as zero and
// costs nothing, neighbours sharing a page are never touched, a slot is
// reused rather than grown, and Trim frees what was given back.
#include "common/platform/page_pool.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <vector>

#include <gtest/gtest.h>

#include "common/platform/page_memory.h"

namespace shardline {
namespace {

const size_t kPage = static_cast<size_t>(sysconf(_SC_PAGESIZE));
const size_t kPerPage = kPage / sizeof(float);

int64_t MinorFaults() {
  rusage u{};
  getrusage(RUSAGE_THREAD, &u);
  return u.ru_minflt;
}

TEST(PagePoolTest, ARangeTakesThePoolsPagesAndGivesThemBackAsZero) {
  absl::StatusOr<std::unique_ptr<PagePool>> pool = PagePool::Create(64 * kPage);
  ASSERT_TRUE(pool.ok()) << pool.status();
  PagedFloats v(40 * kPerPage);
  for (float& f : v) f = 1.0f;
  // Floats [kPerPage / 2, 10.5 pages): the pages wholly inside are 1..9;
  // the half pages at either end stay anonymous and keep their values.
  float* p = v.data() + kPerPage / 2;
  const size_t bytes = 10 * kPage;
  absl::StatusOr<PagePool::Handle> h = (*pool)->Take(p, bytes);
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_NE(*h, PagePool::kNone);
  EXPECT_EQ((*pool)->mapped_bytes(), static_cast<int64_t>(9 * kPage));
  for (size_t i = kPerPage; i < 10 * kPerPage; ++i) v[i] = 7.0f;
  EXPECT_EQ(v[kPerPage / 2], 1.0f) << "a neighbour sharing a page changed";
  EXPECT_EQ(v[10 * kPerPage + kPerPage / 2], 1.0f);
  ASSERT_TRUE((*pool)->Give(*h).ok());
  EXPECT_EQ((*pool)->mapped_bytes(), 0);
  EXPECT_EQ(ResidentBytes(v.data() + kPerPage, 9 * kPage), 0) << "given back, still charged";
  for (size_t i = kPerPage; i < 10 * kPerPage; ++i) ASSERT_EQ(v[i], 0.0f) << i;
  EXPECT_EQ(v[kPerPage - 1], 1.0f);
  EXPECT_EQ(v[10 * kPerPage], 1.0f);
  EXPECT_EQ(v[30 * kPerPage], 1.0f);

  // Taken again elsewhere, before a Trim: the same pages, with what was
  // written into them, and no page faulted in to write them again.
  absl::StatusOr<PagePool::Handle> again = (*pool)->Take(v.data() + 20 * kPerPage, 9 * kPage);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *h) << "a free slot was not reused";
  EXPECT_EQ(v[20 * kPerPage], 7.0f) << "the pool's pages did not move";
  // Against writing as many fresh pages: at least a fault a page fewer.
  // (A sanitizer's shadow memory faults in both, as the kernel pleases.)
  PagedFloats fresh(16 * kPerPage);
  const int64_t before_fresh = MinorFaults();
  for (size_t i = 0; i < 9 * kPerPage; ++i) fresh[i] = 5.0f;
  const int64_t fresh_faults = MinorFaults() - before_fresh;
  const int64_t before = MinorFaults();
  for (size_t i = 20 * kPerPage; i < 29 * kPerPage; ++i) v[i] = 5.0f;
  const int64_t taken_faults = MinorFaults() - before;
  EXPECT_LE(taken_faults + 9, fresh_faults) << "writing a taken range faulted pages in: " << taken_faults
                                            << " faults, against " << fresh_faults << " for fresh pages";
  ASSERT_TRUE((*pool)->Give(*again).ok());

  // Trimmed: the next range taken starts from zero pages.
  (*pool)->Trim();
  absl::StatusOr<PagePool::Handle> trimmed = (*pool)->Take(v.data(), 9 * kPage);
  ASSERT_TRUE(trimmed.ok());
  for (size_t i = 0; i < 9 * kPerPage; ++i) ASSERT_EQ(v[i], 0.0f) << i;
  ASSERT_TRUE((*pool)->Give(*trimmed).ok());
}

TEST(PagePoolTest, RangesAtOnceGetTheirOwnPagesAndOversizedOnesAreRefused) {
  absl::StatusOr<std::unique_ptr<PagePool>> pool = PagePool::Create(4 * kPage);
  ASSERT_TRUE(pool.ok()) << pool.status();
  PagedFloats v(16 * kPerPage);
  absl::StatusOr<PagePool::Handle> a = (*pool)->Take(v.data(), 4 * kPage);
  absl::StatusOr<PagePool::Handle> b = (*pool)->Take(v.data() + 8 * kPerPage, 4 * kPage);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(*a, *b);
  v[0] = 1.0f;
  v[8 * kPerPage] = 2.0f;
  EXPECT_EQ(v[0], 1.0f) << "two ranges share pages";
  EXPECT_TRUE(absl::IsInvalidArgument((*pool)->Take(v.data(), 5 * kPage).status()));
  // Less than a page wholly inside: nothing to take.
  absl::StatusOr<PagePool::Handle> tiny = (*pool)->Take(v.data() + 12 * kPerPage + 1, kPage);
  ASSERT_TRUE(tiny.ok());
  EXPECT_EQ(*tiny, PagePool::kNone);
  EXPECT_TRUE((*pool)->Give(PagePool::kNone).ok());
  ASSERT_TRUE((*pool)->Give(*a).ok());
  ASSERT_TRUE((*pool)->Give(*b).ok());
}

int MappingCount() {
  std::ifstream maps("/proc/self/maps");
  return static_cast<int>(std::count(std::istreambuf_iterator<char>(maps), std::istreambuf_iterator<char>(), '\n'));
}

// A step takes and gives back ranges over and over: the mappings they
// split the buffer into merge again, so the process's mapping count (a
// kernel limit, vm.max_map_count) does not grow with the steps.
TEST(PagePoolTest, TakingAndGivingBackDoesNotAccumulateMappings) {
  absl::StatusOr<std::unique_ptr<PagePool>> pool = PagePool::Create(8 * kPage);
  ASSERT_TRUE(pool.ok()) << pool.status();
  PagedFloats v(256 * kPerPage);
  for (size_t i = 0; i < v.size(); i += kPerPage) v[i] = 1.0f;
  const int before = MappingCount();
  for (int step = 0; step < 200; ++step) {
    std::vector<PagePool::Handle> held;
    for (size_t at = (step % 3) * kPerPage; at + 8 * kPerPage <= v.size(); at += 24 * kPerPage) {
      absl::StatusOr<PagePool::Handle> h = (*pool)->Take(v.data() + at, 8 * kPage);
      ASSERT_TRUE(h.ok()) << h.status();
      held.push_back(*h);
    }
    for (PagePool::Handle h : held) ASSERT_TRUE((*pool)->Give(h).ok());
    (*pool)->Trim();
  }
  EXPECT_LE(MappingCount(), before + 4) << "mappings pile up";
}

}  // namespace
}  // namespace shardline
