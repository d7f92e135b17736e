// The process's file-descriptor limit (RLIMIT_NOFILE): raised to the hard
// limit at start, so a flood of connections meets the servers' own bounds
// (common/net/connection_gate.h) long before the kernel's, and read by
// whoever sizes a budget from it.
#ifndef SHARDLINE_COMMON_PLATFORM_DESCRIPTORS_H_
#define SHARDLINE_COMMON_PLATFORM_DESCRIPTORS_H_

#include <cstdint>

namespace shardline {

// Raises the soft RLIMIT_NOFILE to the hard one (as far as the kernel's
// nr_open allows); returns the soft limit in force afterwards.
int64_t RaiseDescriptorLimit();

// The soft RLIMIT_NOFILE now (1024 if it cannot be read; "unlimited" is
// read as 1 << 20).
int64_t DescriptorLimit();

}  // namespace shardline

#endif  // SHARDLINE_COMMON_PLATFORM_DESCRIPTORS_H_
