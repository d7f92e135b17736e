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
// What the pool's file holds is at most the most pages mapped at once
// (Take), so a plan of the ranges whole at once is a plan of the pool.
//
// Not thread-safe: one caller (the training thread) maps and unmaps; other
// threads may read and write the mapped ranges in between.
#ifndef SHARDLINE_COMMON_PLATFORM_PAGE_POOL_H_
#define SHARDLINE_COMMON_PLATFORM_PAGE_POOL_H_

#include <cstddef>
#include <cstdint>
#include <map>
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
  // anything outside the range are left as they are. The pages come from
  // the free pages of the pool's file lowest first, in as many pieces as
  // they lie in, and the file grows only by what no free page covers: it
  // never holds more pages than were mapped at once (a pool of equal slots
  // did, each slot grown to the largest range it had held: twice the
  // ranges mapped at once at stage 3). kNone if no page lies wholly inside;
  // kInvalidArgument if bytes > max_bytes; kInternal naming the call if the
  // kernel refuses (the range then holds zero pages).
  absl::StatusOr<Handle> Take(void* p, size_t bytes);
  // Maps fresh zero pages back over the range of `h` (reads as zero, not
  // charged) and returns its pool pages for reuse. kNone: nothing to do.
  // kInternal naming the call if the kernel refuses.
  absl::Status Give(Handle h);
  // Frees the free pages that were written since the last Trim (their
  // contents are lost; the next Take of them starts from zero pages).
  void Trim();

  // Bytes of pool ranges mapped now.
  int64_t mapped_bytes() const { return mapped_bytes_; }
  // Bytes of memory the pool's file holds now, mapped or not (what the
  // kernel charges for it; fstat's blocks), or -1 if fstat fails.
  int64_t held_bytes() const;

 private:
  // A run of the file's pages: [first, first + count), in pages.
  struct Run {
    size_t first = 0;
    size_t count = 0;
  };
  struct Mapping {
    PageSpan span;          // the mapped range; empty when the handle is free
    std::vector<Run> runs;  // the file's pages mapped over it, in order
  };
  PagePool(int fd, size_t max_bytes) : fd_(fd), max_bytes_(max_bytes) {}

  // Takes `pages` of the file: free runs lowest first, then new pages at
  // its end. kInternal naming ftruncate if the file cannot grow.
  absl::StatusOr<std::vector<Run>> Allocate(size_t pages);
  // Returns runs to the free set, merging neighbours; `written` marks them
  // for the next Trim.
  void Free(const std::vector<Run>& runs, bool written);

  const int fd_;
  const size_t max_bytes_;
  size_t file_pages_ = 0;
  std::map<size_t, size_t> free_;     // first page -> count, no two adjacent
  std::map<size_t, size_t> written_;  // free pages written since the last Trim, the same way
  std::vector<Mapping> mappings_;
  std::vector<Handle> free_handles_;
  int64_t mapped_bytes_ = 0;
};

}  // namespace shardline

#endif  // SHARDLINE_COMMON_PLATFORM_PAGE_POOL_H_
