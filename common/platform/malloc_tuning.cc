#include "common/platform/malloc_tuning.h"

#include <malloc.h>

namespace shardline {

void TuneMallocForLargeBuffers() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
}

void UseOneMallocArena() { mallopt(M_ARENA_MAX, 1); }

// Under a sanitizer there is nothing to trim, and glibc's malloc_trim on a
// thread that never used an arena (the sanitizer served its mallocs) leaves
// it marked attached, which glibc asserts against when the thread exits
// ("__malloc_arena_thread_freeres: a->attached_threads > 0"; seen under
// ASan and TSan in IslandsTest).
void ReleaseFreedMemory() {
  if (!kSanitizerMalloc) malloc_trim(0);
}

}  // namespace shardline
