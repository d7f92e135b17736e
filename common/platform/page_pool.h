// Physical pages that move between address ranges, so a buffer laid out
// whole (page_memory.h) can hold different parts of itself in turn without
// the kernel allocating, zeroing and faulting in fresh pages each time.
//
// ZeRO-3 gathers every bucket of the parameters twice a step and gives it
// back after each pass (docs/collectives.md, "Stage 3"). Giving back with
// ReleasePages and writing again costs a page fault per 4 KiB - measured,
// 111,000 a step per worker for the 50.6M GPT at N = 4, 1.5 s of kernel
// time a step across the workers. A pool instead maps its own pages (a
// memfd's) over the range to be written, and fresh zero pages back over
// it afterwards: one mmap each way, pages populated in the call.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<PagePool> pool, PagePool::Create(bucket_bytes));
//   ASSIGN_OR_RETURN(PagePool::Handle h, pool->Take(params.data() + b, n * sizeof(float)));
//   ... gather into the range, read it ...
//   RETURN_IF_ERROR(pool->Give(h));     // reads as zero again, not charged
//   pool->Trim();                       // between steps: the pool's pages freed
//
// Not thread-safe: one caller (the training thread) maps and unmaps; other
// threads may read and write the mapped ranges in between.
#ifndef SHARDLINE_COMMON_PLATFORM_PAGE_POOL_H_
#define SHARDLINE_COMMON_PLATFORM_PAGE_POOL_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/platform/page_memory.h"

namespace shardline {

class PagePool {
 public:
  // A pool handing out ranges of at most `max_bytes` each. kUnavailable,
  // naming the call, if the kernel gives no memfd.
  static absl::StatusOr<std::unique_ptr<PagePool>> Create(size_t max_bytes);
  // Closes the pool's file. Ranges still mapped keep their pages until they
  // are unmapped (with their buffer, or by Give).
  ~PagePool();
  PagePool(const PagePool&) = delete;
  PagePool& operator=(const PagePool&) = delete;

  using Handle = int;
  static constexpr Handle kNone = -1;

  // Maps pool pages over the pages wholly inside [p, p + bytes) - memory of
  // a private anonymous mapping (MapZeroPages) - discarding what was there.
  // Their contents are stale (whatever the pool's pages last held): for a
  // range the caller overwrites before reading. Bytes sharing a page with
  // anything outside the range are left as they are. kNone if no page lies
  // wholly inside; kInvalidArgument if bytes > max_bytes; kInternal naming
  // the call if the kernel refuses (the range then holds zero pages).
  absl::StatusOr<Handle> Take(void* p, size_t bytes);
  // Maps fresh zero pages back over the range of `h` (reads as zero, not
  // charged) and returns its pool pages for reuse. kNone: nothing to do.
  // kInternal naming the call if the kernel refuses.
  absl::Status Give(Handle h);
  // Frees the pages of every range given back since the last Trim (their
  // contents are lost; the next Take of them starts from zero pages).
  void Trim();

  // Bytes of pool ranges mapped now.
  int64_t mapped_bytes() const { return mapped_bytes_; }

 private:
  struct Slot {
    PageSpan span;       // the mapped range while in use; empty when free
    bool dirty = false;  // given back since the last Trim
  };
  PagePool(int fd, size_t slot_bytes) : fd_(fd), slot_bytes_(slot_bytes) {}

  const int fd_;
  const size_t slot_bytes_;  // each slot's span of the file, a multiple of the page size
  std::vector<Slot> slots_;
  std::vector<Handle> free_;
  int64_t mapped_bytes_ = 0;
};

}  // namespace shardline

#endif  // SHARDLINE_COMMON_PLATFORM_PAGE_POOL_H_
