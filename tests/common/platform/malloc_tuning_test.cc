// ReleaseFreedMemory gives back what a thread's malloc arena kept after the
// thread freed it: with TuneMallocForLargeBuffers, a 24 MiB block freed on
// another thread stays resident in that thread's arena until then.
#include "common/platform/malloc_tuning.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace shardline {
namespace {

// This process's resident set now (/proc/self/statm), in bytes.
int64_t RssBytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return -1;
  long size = 0, resident = 0;
  const int got = std::fscanf(f, "%ld %ld", &size, &resident);
  std::fclose(f);
  return got == 2 ? static_cast<int64_t>(resident) * 4096 : -1;
}

TEST(MallocTuningTest, FreedMemoryAThreadsArenaKeptIsGivenBack) {
  if (kSanitizerMalloc) GTEST_SKIP() << "the sanitizers replace malloc: glibc's arenas are not in use";
  TuneMallocForLargeBuffers();
  constexpr size_t kBlock = 24 << 20;  // under the 32 MiB mmap threshold: from the arena
  std::thread([] {
    // Two blocks so the freed one is not merely the heap's top, which
    // glibc may trim on free past the threshold anyway.
    char* a = static_cast<char*>(std::malloc(kBlock));
    char* b = static_cast<char*>(std::malloc(1 << 16));
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    std::memset(a, 1, kBlock);
    std::memset(b, 1, 1 << 16);
    // Neither the writes nor the block may be optimised away.
    asm volatile("" : : "r"(a), "r"(b) : "memory");
    std::free(a);
    // b stays allocated (and leaks with the thread: the arena outlives it).
  }).join();
  const int64_t kept = RssBytes();
  ReleaseFreedMemory();
  const int64_t after = RssBytes();
  ASSERT_GT(kept, 0);
  EXPECT_GT(kept - after, static_cast<int64_t>(kBlock) * 3 / 4)
      << "resident " << kept << " bytes before ReleaseFreedMemory, " << after << " after";
}

}  // namespace
}  // namespace shardline
