// Runs a system command (ip, tc, mount tools) to completion for the chaos
// harness, with its output captured for the error.
#ifndef SHARDLINE_TESTS_CHAOS_COMMAND_H_
#define SHARDLINE_TESTS_CHAOS_COMMAND_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace shardline {

// Runs argv (argv[0] a path) and waits at most 30 s. OK if it exited 0;
// otherwise an error naming the command line, its exit and its output.
absl::Status RunCommand(const std::vector<std::string>& argv);

}  // namespace shardline

#endif  // SHARDLINE_TESTS_CHAOS_COMMAND_H_
