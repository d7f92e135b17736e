#include "common/platform/page_pool.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace shardline {
namespace {

size_t PageSize() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

absl::Status Errno(const char* call, int error) {
  return absl::InternalError(absl::StrCat("page pool: ", call, ": ", std::strerror(error)));
}

// Fresh private zero pages over [begin, begin + length), as MapZeroPages
// gives.
bool MapZero(uintptr_t begin, size_t length) {
  return mmap(reinterpret_cast<void*>(begin), length, PROT_READ | PROT_WRITE,
              MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0) != MAP_FAILED;
}

}  // namespace

absl::StatusOr<std::unique_ptr<PagePool>> PagePool::Create(size_t max_bytes) {
  const int fd = memfd_create("shardline-page-pool", MFD_CLOEXEC);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("page pool: memfd_create: ", std::strerror(errno)));
  const size_t page = PageSize();
  const size_t slot = std::max<size_t>((max_bytes + page - 1) / page * page, page);
  return std::unique_ptr<PagePool>(new PagePool(fd, slot));
}

PagePool::~PagePool() { close(fd_); }

absl::StatusOr<PagePool::Handle> PagePool::Take(void* p, size_t bytes) {
  if (bytes > slot_bytes_) {
    return absl::InvalidArgumentError(absl::StrCat("page pool: a range of ", bytes, " bytes; at most ", slot_bytes_));
  }
  const size_t page = PageSize();
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes) / page * page;
  if (end <= begin) return kNone;
  Handle h;
  if (!free_.empty()) {
    h = free_.back();
    free_.pop_back();
  } else {
    h = static_cast<Handle>(slots_.size());
    if (ftruncate(fd_, static_cast<off_t>((slots_.size() + 1) * slot_bytes_)) != 0) return Errno("ftruncate", errno);
    slots_.emplace_back();
  }
  const off_t offset = static_cast<off_t>(static_cast<size_t>(h) * slot_bytes_);
  if (mmap(reinterpret_cast<void*>(begin), end - begin, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED | MAP_POPULATE,
           fd_, offset) == MAP_FAILED) {
    const int error = errno;
    free_.push_back(h);
    // A failed MAP_FIXED may have unmapped the range: zero pages again.
    MapZero(begin, end - begin);
    return Errno("mmap", error);
  }
  slots_[static_cast<size_t>(h)] = Slot{begin, end - begin, false};
  mapped_bytes_ += static_cast<int64_t>(end - begin);
  return h;
}

absl::Status PagePool::Give(Handle h) {
  if (h == kNone) return absl::OkStatus();
  Slot& s = slots_[static_cast<size_t>(h)];
  // A slot still mapped somewhere is never handed out again: on failure it
  // stays in use (its pages lost to the pool) rather than aliased.
  if (!MapZero(s.begin, s.length)) return Errno("mmap", errno);
  mapped_bytes_ -= static_cast<int64_t>(s.length);
  s = Slot{0, 0, true};
  free_.push_back(h);
  return absl::OkStatus();
}

void PagePool::Trim() {
  for (size_t h = 0; h < slots_.size(); ++h) {
    if (!slots_[h].dirty) continue;
    slots_[h].dirty = false;
    // Advice on our own file: a failure leaves the pages allocated, which
    // costs memory and nothing else.
    fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(h * slot_bytes_),
              static_cast<off_t>(slot_bytes_));
  }
}

}  // namespace shardline
