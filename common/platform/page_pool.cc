#include "common/platform/page_pool.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "common/platform/page_memory.h"

namespace shardline {
namespace {

absl::Status Errno(const char* call, int error) {
  return absl::InternalError(absl::StrCat("page pool: ", call, ": ", std::strerror(error)));
}

// Runs of pages as a map from first page to count, no two touching.
using RunMap = std::map<size_t, size_t>;

// Adds [first, first + count), which overlaps nothing in `m`, merging it
// with the runs it touches.
void AddRun(RunMap& m, size_t first, size_t count) {
  if (count == 0) return;
  auto next = m.lower_bound(first);
  if (next != m.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == first) {
      first = prev->first;
      count += prev->second;
      m.erase(prev);
    }
  }
  if (next != m.end() && first + count == next->first) {
    count += next->second;
    m.erase(next);
  }
  m[first] = count;
}

// Removes whatever of [first, first + count) is in `m`.
void RemoveRun(RunMap& m, size_t first, size_t count) {
  const size_t end = first + count;
  auto it = m.upper_bound(first);
  if (it != m.begin()) --it;
  while (it != m.end() && it->first < end) {
    const size_t a = it->first, b = it->first + it->second;
    if (b <= first) {
      ++it;
      continue;
    }
    it = m.erase(it);
    if (a < first) m[a] = first - a;
    if (b > end) m[end] = b - end;
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<PagePool>> PagePool::Create(size_t max_bytes) {
  const int fd = memfd_create("shardline-page-pool", MFD_CLOEXEC);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("page pool: memfd_create: ", std::strerror(errno)));
  return std::unique_ptr<PagePool>(new PagePool(fd, max_bytes));
}

PagePool::~PagePool() { close(fd_); }

int64_t PagePool::held_bytes() const {
  struct stat st{};
  if (fstat(fd_, &st) != 0) return -1;
  return static_cast<int64_t>(st.st_blocks) * 512;
}

absl::StatusOr<std::vector<PagePool::Run>> PagePool::Allocate(size_t pages) {
  std::vector<Run> runs;
  size_t left = pages;
  for (auto it = free_.begin(); it != free_.end() && left > 0;) {
    const size_t first = it->first, count = it->second, take = std::min(left, count);
    it = free_.erase(it);
    // The rest of a run stays free (it touches no other run, as the run did not).
    if (take < count) it = free_.emplace(first + take, count - take).first;
    runs.push_back(Run{first, take});
    RemoveRun(written_, first, take);
    left -= take;
  }
  if (left > 0) {
    if (ftruncate(fd_, static_cast<off_t>((file_pages_ + left) * PageSize())) != 0) {
      const int error = errno;
      Free(runs, true);
      return Errno("ftruncate", error);
    }
    if (!runs.empty() && runs.back().first + runs.back().count == file_pages_) {
      runs.back().count += left;
    } else {
      runs.push_back(Run{file_pages_, left});
    }
    file_pages_ += left;
  }
  return runs;
}

void PagePool::Free(const std::vector<Run>& runs, bool written) {
  for (const Run& r : runs) {
    AddRun(free_, r.first, r.count);
    if (written) AddRun(written_, r.first, r.count);
  }
}

absl::StatusOr<PagePool::Handle> PagePool::Take(void* p, size_t bytes) {
  if (bytes > max_bytes_) {
    return absl::InvalidArgumentError(absl::StrCat("page pool: a range of ", bytes, " bytes; at most ", max_bytes_));
  }
  const PageSpan span = InteriorPages(p, bytes);
  if (span.empty()) return kNone;
  const size_t page = PageSize();
  absl::StatusOr<std::vector<Run>> runs = Allocate(span.size() / page);
  if (!runs.ok()) return runs.status();
  uintptr_t at = span.begin;
  for (const Run& r : *runs) {
    if (mmap(reinterpret_cast<void*>(at), r.count * page, PROT_READ | PROT_WRITE,
             MAP_SHARED | MAP_FIXED | MAP_POPULATE, fd_, static_cast<off_t>(r.first * page)) == MAP_FAILED) {
      const int error = errno;
      Free(*runs, true);
      // A failed MAP_FIXED may have unmapped the range: zero pages again.
      MapZeroPagesOver(span);
      return Errno("mmap", error);
    }
    at += r.count * page;
  }
  Handle h;
  if (!free_handles_.empty()) {
    h = free_handles_.back();
    free_handles_.pop_back();
  } else {
    h = static_cast<Handle>(mappings_.size());
    mappings_.emplace_back();
  }
  mappings_[static_cast<size_t>(h)] = Mapping{span, *std::move(runs)};
  mapped_bytes_ += static_cast<int64_t>(span.size());
  return h;
}

absl::Status PagePool::Give(Handle h) {
  if (h == kNone) return absl::OkStatus();
  Mapping& r = mappings_[static_cast<size_t>(h)];
  // Pages still mapped somewhere are never handed out again: on failure the
  // range stays in use (its pages lost to the pool) rather than aliased.
  if (!MapZeroPagesOver(r.span)) return Errno("mmap", errno);
  mapped_bytes_ -= static_cast<int64_t>(r.span.size());
  Free(r.runs, true);
  r = Mapping{};
  free_handles_.push_back(h);
  return absl::OkStatus();
}

void PagePool::Trim() {
  const size_t page = PageSize();
  for (const auto& [first, count] : written_) {
    // Advice on our own file: a failure leaves the pages allocated, which
    // costs memory and nothing else.
    fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(first * page),
              static_cast<off_t>(count * page));
  }
  written_.clear();
}

}  // namespace shardline
