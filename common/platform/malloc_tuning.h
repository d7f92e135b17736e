// Process-wide allocator settings for processes that move large buffers.
#ifndef SHARDLINE_COMMON_PLATFORM_MALLOC_TUNING_H_
#define SHARDLINE_COMMON_PLATFORM_MALLOC_TUNING_H_

namespace shardline {

// glibc serves allocations above 128 KiB with fresh mmap()s and returns them
// to the kernel on free(), so every 1 MiB network segment costs page faults
// and unmaps (perf: about 15% of an all-reduce). This keeps blocks up to
// 32 MiB (glibc's maximum) in the heap and trims only above 512 MiB free.
// Call once at the start of main(); the price is up to that much retained
// memory.
void TuneMallocForLargeBuffers();

}  // namespace shardline

#endif  // SHARDLINE_COMMON_PLATFORM_MALLOC_TUNING_H_
