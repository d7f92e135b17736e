#include "common/platform/page_pool.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/platform/page_memory.h"

namespace shardline {
namespace {

absl::Status Errno(const char* call, int error) {
  return absl::InternalError(absl::StrCat("page pool: ", call, ": ", std::strerror(error)));
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
  const PageSpan span = InteriorPages(p, bytes);
  if (span.empty()) return kNone;
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
  if (mmap(reinterpret_cast<void*>(span.begin), span.size(), PROT_READ | PROT_WRITE,
           MAP_SHARED | MAP_FIXED | MAP_POPULATE, fd_, offset) == MAP_FAILED) {
    const int error = errno;
    free_.push_back(h);
    // A failed MAP_FIXED may have unmapped the range: zero pages again.
    MapZeroPagesOver(span);
    return Errno("mmap", error);
  }
  slots_[static_cast<size_t>(h)] = Slot{span, false};
  mapped_bytes_ += static_cast<int64_t>(span.size());
  return h;
}

absl::Status PagePool::Give(Handle h) {
  if (h == kNone) return absl::OkStatus();
  Slot& s = slots_[static_cast<size_t>(h)];
  // A slot still mapped somewhere is never handed out again: on failure it
  // stays in use (its pages lost to the pool) rather than aliased.
  if (!MapZeroPagesOver(s.span)) return Errno("mmap", errno);
  mapped_bytes_ -= static_cast<int64_t>(s.span.size());
  s = Slot{PageSpan{}, true};
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
