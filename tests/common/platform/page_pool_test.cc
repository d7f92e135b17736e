// Pages that move between ranges (common/platform/page_pool.h): a range
// taken holds the pool's pages (written pages show up in it as they were
// left, no fresh page is faulted in), a range given back reads as zero and
// costs nothing, neighbours sharing a page are never touched, free pages
// are reused rather than the pool grown, the pool never holds more than was
// mapped at once, and Trim frees what was given back.
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
  EXPECT_EQ(v[20 * kPerPage], 7.0f) << "the pool's pages did not move";
  EXPECT_EQ((*pool)->held_bytes(), static_cast<int64_t>(9 * kPage)) << "the pool grew instead of reusing its pages";
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

// Ranges of every size, taken and given back in the pattern of a ZeRO-3
// step (the parts of buckets around a rank's piece differ in size): the
// pool's file never holds more pages than were mapped at once. (A pool of
// equal slots grew each slot to the largest range it had held: here 24
// pages for 16 mapped.) A range taken from free pages lying apart reads
// and writes as one, and Trim frees every page.
TEST(PagePoolTest, ThePoolHoldsNoMoreThanWasMappedAtOnce) {
  absl::StatusOr<std::unique_ptr<PagePool>> pool = PagePool::Create(16 * kPage);
  ASSERT_TRUE(pool.ok()) << pool.status();
  PagedFloats v(64 * kPerPage);
  int64_t peak = 0;
  auto take = [&](size_t at_page, size_t pages) {
    absl::StatusOr<PagePool::Handle> h = (*pool)->Take(v.data() + at_page * kPerPage, pages * kPage);
    EXPECT_TRUE(h.ok()) << h.status();
    for (size_t i = 0; i < pages * kPerPage; ++i) v[at_page * kPerPage + i] = static_cast<float>(at_page + 1);
    peak = std::max(peak, (*pool)->mapped_bytes());
    EXPECT_LE((*pool)->held_bytes(), peak) << "after taking " << pages << " pages at page " << at_page;
    return h.ok() ? *h : PagePool::kNone;
  };
  auto give = [&](PagePool::Handle h) {
    ASSERT_TRUE((*pool)->Give(h).ok());
    EXPECT_LE((*pool)->held_bytes(), peak);
  };
  for (int round = 0; round < 3; ++round) {
    // Two ranges of 8 pages, then four of 4: 16 pages mapped at most.
    const PagePool::Handle a = take(0, 8), b = take(16, 8);
    give(a);
    give(b);
    std::vector<PagePool::Handle> four;
    for (size_t k = 0; k < 4; ++k) four.push_back(take(32 + 8 * k, 4));
    for (PagePool::Handle h : four) give(h);
    EXPECT_EQ(peak, static_cast<int64_t>(16 * kPage));
    EXPECT_EQ((*pool)->held_bytes(), peak);
  }
  // Free pages lying apart: 4 + 4 with 4 in use between them, taken as one
  // range of 8 that reads back what was written, the range in between
  // untouched.
  const PagePool::Handle x = take(0, 4), y = take(8, 4), z = take(16, 4);
  give(x);
  give(z);
  const PagePool::Handle w = take(32, 8);
  for (size_t i = 0; i < 8 * kPerPage; ++i) v[32 * kPerPage + i] = static_cast<float>(i);
  for (size_t i = 0; i < 8 * kPerPage; ++i) ASSERT_EQ(v[32 * kPerPage + i], static_cast<float>(i)) << i;
  for (size_t i = 0; i < 4 * kPerPage; ++i) ASSERT_EQ(v[8 * kPerPage + i], 9.0f) << i;
  EXPECT_EQ((*pool)->held_bytes(), static_cast<int64_t>(16 * kPage));
  give(w);
  give(y);
  (*pool)->Trim();
  EXPECT_EQ((*pool)->held_bytes(), 0) << "Trim left pages in the pool";
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
