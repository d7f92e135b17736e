#include "common/platform/malloc_tuning.h"

#include <malloc.h>

namespace shardline {

void TuneMallocForLargeBuffers() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
}

void UseOneMallocArena() { mallopt(M_ARENA_MAX, 1); }

void ReleaseFreedMemory() { malloc_trim(0); }

}  // namespace shardline
