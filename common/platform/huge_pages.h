// Transparent huge pages for large buffers filled once (a data set, a file
// read whole).
#ifndef SHARDLINE_COMMON_PLATFORM_HUGE_PAGES_H_
#define SHARDLINE_COMMON_PLATFORM_HUGE_PAGES_H_

#include <cstddef>

namespace shardline {

// Asks the kernel to back the 2 MiB-aligned part of [p, p + n) with
// transparent huge pages (madvise(MADV_HUGEPAGE), for kernels in "madvise"
// mode). Call before the memory is first touched: filling 200 MB then costs
// about a hundred page faults instead of fifty thousand. Advice only:
// nothing changes where the kernel declines.
void AdviseHugePages(void* p, size_t n);

}  // namespace shardline

#endif  // SHARDLINE_COMMON_PLATFORM_HUGE_PAGES_H_
