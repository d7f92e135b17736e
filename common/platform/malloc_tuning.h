// Process-wide allocator settings for processes that move large buffers.
#ifndef SHARDLINE_COMMON_PLATFORM_MALLOC_TUNING_H_
#define SHARDLINE_COMMON_PLATFORM_MALLOC_TUNING_H_

namespace shardline {

// Whether this build's malloc is a sanitizer's (AddressSanitizer or
// ThreadSanitizer, under GCC's macros or clang's __has_feature): glibc's
// arenas are then not in use, so ReleaseFreedMemory has nothing to trim.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitizerMalloc = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool kSanitizerMalloc = true;
#else
inline constexpr bool kSanitizerMalloc = false;
#endif
#else
inline constexpr bool kSanitizerMalloc = false;
#endif

// glibc serves allocations above 128 KiB with fresh mmap()s and returns them
// to the kernel on free(), so every 1 MiB network segment costs page faults
// and unmaps (perf: about 15% of an all-reduce). This keeps blocks up to
// 32 MiB (glibc's maximum) in the heap and trims only above 512 MiB free.
// Call once at the start of main(); the price is up to that much retained
// memory.
void TuneMallocForLargeBuffers();

// One malloc arena for every thread, for a process under a memory limit:
// glibc's per-thread arenas each keep what their threads freed (gRPC's
// threads, the collectives'), about 50 MiB across a 50.6M-parameter GPT
// worker's arenas (bench/RESULTS.md, issue 48), which one shared arena
// reuses instead. Costs 2-5% of austen_gpt's samples/s at N = 2 (malloc
// contention), so it is not the default. Call before threads start.
void UseOneMallocArena();

// Gives back to the kernel what every malloc arena holds freed
// (malloc_trim(0): whole free pages anywhere in a heap, not only at its
// top). TuneMallocForLargeBuffers keeps freed memory for reuse, and each
// thread's arena keeps its own: after the occasional large transients (an
// evaluation, a save, an in-memory snapshot, on their own threads), what
// the arenas keep would add up to more than is ever in use at once
// (bench/RESULTS.md, issue 48: +20 MiB on austen_gpt's workers). Costs a
// walk of the free lists: call it after such events, not every step. Does
// nothing under a sanitizer (kSanitizerMalloc).
void ReleaseFreedMemory();

}  // namespace shardline

#endif  // SHARDLINE_COMMON_PLATFORM_MALLOC_TUNING_H_
