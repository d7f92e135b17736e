// Memory that is charged only where it is written, and given back to the
// kernel by range: what lets a worker hold 1/N of a buffer laid out as the
// whole (ZeRO-3, docs/collectives.md "Stage 3").
//
//   PagedFloats params(total);              // zero; no page touched yet
//   ... write and read a bucket ...
//   ReleasePages(params.data() + b, n);     // its pages back to the kernel
//
// A released range reads as zeros; writing it charges its pages again.
#ifndef SHARDLINE_COMMON_PLATFORM_PAGE_MEMORY_H_
#define SHARDLINE_COMMON_PLATFORM_PAGE_MEMORY_H_

#include <cstddef>
#include <cstdint>

namespace shardline {

// Fresh anonymous pages: zero, and not charged to the process until written.
void* MapZeroPages(size_t bytes);
void UnmapPages(void* p, size_t bytes);

// The system's page size.
size_t PageSize();

// The pages wholly inside [p, p + bytes): page-aligned [begin, end), empty
// (end <= begin) if no page lies wholly inside.
struct PageSpan {
  uintptr_t begin = 0;
  uintptr_t end = 0;
  bool empty() const { return end <= begin; }
  size_t size() const { return empty() ? 0 : end - begin; }
};
PageSpan InteriorPages(const void* p, size_t bytes);

// Fresh pages as MapZeroPages gives (the same flags, so they merge with
// their neighbours into one mapping again) over `span`, replacing whatever
// was mapped there. False if the kernel refuses (errno says why).
bool MapZeroPagesOver(PageSpan span);

// Gives back to the kernel every page wholly inside [p, p + bytes)
// (madvise MADV_DONTNEED): they read as zero afterwards and no longer count
// in the process's memory. Bytes sharing a page with anything outside the
// range are left as they are, so neighbours are never touched. Only for
// memory from MapZeroPages or a private anonymous mapping.
void ReleasePages(void* p, size_t bytes);

// Bytes of the pages overlapping [p, p + bytes) that are resident now
// (mincore): what a buffer of MapZeroPages memory costs the process. A
// page that was only read since it was mapped or released counts too
// (it maps the kernel's shared zero page, which costs nothing).
int64_t ResidentBytes(const void* p, size_t bytes);

// The largest resident set this process has had so far, in bytes
// (getrusage; 0 if it fails).
int64_t PeakRssBytes();

// A float buffer of MapZeroPages memory: zero when made or resized, and
// charged only where written since. Not a std::vector because a vector's
// value-initialisation writes (or would have to read) every element; this
// never touches a page it is not asked to. Move-only.
class PagedFloats {
 public:
  PagedFloats() = default;
  explicit PagedFloats(size_t n) { resize(n); }
  ~PagedFloats() { UnmapPages(data_, size_ * sizeof(float)); }
  PagedFloats(PagedFloats&& other) noexcept : data_(other.data_), size_(other.size_) {
    other.data_ = nullptr;
    other.size_ = 0;
  }
  PagedFloats& operator=(PagedFloats&& other) noexcept {
    if (this != &other) {
      UnmapPages(data_, size_ * sizeof(float));
      data_ = other.data_;
      size_ = other.size_;
      other.data_ = nullptr;
      other.size_ = 0;
    }
    return *this;
  }
  PagedFloats(const PagedFloats&) = delete;
  PagedFloats& operator=(const PagedFloats&) = delete;

  // n elements, all zero: fresh pages unless the size is already n (then
  // nothing changes, contents included).
  void resize(size_t n) {
    if (n == size_ && data_ != nullptr) return;
    UnmapPages(data_, size_ * sizeof(float));
    data_ = static_cast<float*>(MapZeroPages(n * sizeof(float)));
    size_ = n;
  }

  float* data() { return data_; }
  const float* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  float& operator[](size_t i) { return data_[i]; }
  const float& operator[](size_t i) const { return data_[i]; }
  float* begin() { return data_; }
  float* end() { return data_ + size_; }
  const float* begin() const { return data_; }
  const float* end() const { return data_ + size_; }

 private:
  float* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace shardline

#endif  // SHARDLINE_COMMON_PLATFORM_PAGE_MEMORY_H_
