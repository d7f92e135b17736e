#include "common/platform/malloc_tuning.h"

#include <malloc.h>

namespace shardline {

void TuneMallocForLargeBuffers() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
}

void UseOneMallocArena() { mallopt(M_ARENA_MAX, 1); }

// Under AddressSanitizer or ThreadSanitizer the program's memory is the
// sanitizer's allocator's, not glibc's arenas, so there is nothing to trim;
// and glibc's malloc_trim on a thread that never used an arena (the
// sanitizer served its mallocs) leaves it marked attached, which glibc
// asserts against when the thread exits ("__malloc_arena_thread_freeres:
// a->attached_threads > 0"; seen under ASan in IslandsTest).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SHARDLINE_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SHARDLINE_SANITIZED 1
#endif
#endif

void ReleaseFreedMemory() {
#ifdef SHARDLINE_SANITIZED
  return;
#else
  malloc_trim(0);
#endif
}

}  // namespace shardline
