// What every shardline binary does first in main().
#ifndef SHARDLINE_COMMON_PLATFORM_PROCESS_INIT_H_
#define SHARDLINE_COMMON_PLATFORM_PROCESS_INIT_H_

namespace shardline {

// The umask every file and directory a shardline process creates is made
// with: workdirs, checkpoints, logs, metrics and RocksDB files are private
// to the user who runs the job (077: directories 0700, files 0600), unless
// $SHARDLINE_UMASK (octal, e.g. 022) says otherwise; a value that is not
// octal ends the process with exit code 2, naming it.
inline constexpr char kUmaskEnvVar[] = "SHARDLINE_UMASK";

// That umask first; the descriptor limit raised to the hard limit
// (descriptors.h); then symbolized stack traces on crashes (absl's failure signal handler, which
// also takes SIGTERM: install any graceful-stop handler after this), the
// allocator settings for large buffers (malloc_tuning.h), and absl::Mutex's
// deadlock detection off unless SHARDLINE_MUTEX_DEADLOCK_DETECTION=1: the
// Debian build of Abseil has it on, and it looks every lock up in one
// process-wide graph (7% of the coordinator's CPU at 4,096 workers). Tests,
// which do not call this, keep it.
void InitProcess(const char* argv0);

}  // namespace shardline

#endif  // SHARDLINE_COMMON_PLATFORM_PROCESS_INIT_H_
