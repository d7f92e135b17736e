// What every shardline binary does first in main().
#ifndef SHARDLINE_COMMON_PROCESS_INIT_H_
#define SHARDLINE_COMMON_PROCESS_INIT_H_

namespace shardline {

// Symbolized stack traces on crashes (absl's failure signal handler, which
// also takes SIGTERM: install any graceful-stop handler after this), and
// the allocator settings for large buffers (malloc_tuning.h).
void InitProcess(const char* argv0);

}  // namespace shardline

#endif  // SHARDLINE_COMMON_PROCESS_INIT_H_
