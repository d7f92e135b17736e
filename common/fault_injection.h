// Crash points for tests of crash safety. With the environment variable
// SHARDLINE_CRASH_AT="<point>:<step>:<marker file>" a process reaching that
// point for that step kills itself with SIGKILL (no cleanup, as a real kill),
// once: it first creates the marker file, and does nothing if it exists, so
// restarted processes (which inherit the variable) go on.
// Points: "after_commit_record" (coordinator: the RocksDB commit record is
// written, COMMITTED is not), "before_shard_rename" (worker: the shard is
// written and fsynced under its temporary name, not renamed).
#ifndef SHARDLINE_COMMON_FAULT_INJECTION_H_
#define SHARDLINE_COMMON_FAULT_INJECTION_H_

#include <cstdint>

#include "absl/strings/string_view.h"

namespace shardline {

void CrashPoint(absl::string_view point, int64_t step);

}  // namespace shardline

#endif  // SHARDLINE_COMMON_FAULT_INJECTION_H_
