#include "common/platform/page_memory.h"

#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <vector>

namespace shardline {
namespace {

constexpr int kZeroPageFlags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;

}  // namespace

size_t PageSize() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

PageSpan InteriorPages(const void* p, size_t bytes) {
  const size_t page = PageSize();
  return PageSpan{(reinterpret_cast<uintptr_t>(p) + page - 1) / page * page,
                  (reinterpret_cast<uintptr_t>(p) + bytes) / page * page};
}

void* MapZeroPages(size_t bytes) {
  if (bytes == 0) bytes = 1;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, kZeroPageFlags, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  return p;
}

bool MapZeroPagesOver(PageSpan span) {
  return mmap(reinterpret_cast<void*>(span.begin), span.size(), PROT_READ | PROT_WRITE, kZeroPageFlags | MAP_FIXED,
              -1, 0) != MAP_FAILED;
}

void UnmapPages(void* p, size_t bytes) {
  if (p != nullptr) munmap(p, bytes == 0 ? 1 : bytes);
}

void ReleasePages(void* p, size_t bytes) {
  const PageSpan span = InteriorPages(p, bytes);
  if (span.empty()) return;
  // Advice on our own private anonymous memory: it cannot fail but for a
  // bad range, which would be a bug above; the memory then stays charged.
  madvise(reinterpret_cast<void*>(span.begin), span.size(), MADV_DONTNEED);
}

int64_t ResidentBytes(const void* p, size_t bytes) {
  if (p == nullptr || bytes == 0) return 0;
  const size_t page = PageSize();
  const uintptr_t begin = reinterpret_cast<uintptr_t>(p) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes + page - 1) / page * page;
  std::vector<unsigned char> resident((end - begin) / page);
  if (mincore(reinterpret_cast<void*>(begin), end - begin, resident.data()) != 0) return 0;
  int64_t pages = 0;
  for (unsigned char r : resident) pages += r & 1;
  return pages * static_cast<int64_t>(page);
}

int64_t PeakRssBytes() {
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

}  // namespace shardline
