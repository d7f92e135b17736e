// Command-line parsing for `shardline <command>`: "--name=value" and
// "--name value", repeatable flags, and positional arguments. Unknown flags
// are errors that name the flag and the command.
//
//   Args args;
//   RETURN_IF_ERROR(ParseArgs(argc, argv, /*first=*/2, {{"config", "workdir"}, {"set"}}, "shardline train", &args));
//   std::string config = args.Get("config");
#ifndef SHARDLINE_COMMON_PLATFORM_ARGS_H_
#define SHARDLINE_COMMON_PLATFORM_ARGS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace shardline {

struct Args {
  std::map<std::string, std::vector<std::string>> flags;
  std::vector<std::string> positional;
  bool help = false;

  // The last value of a flag, or "" if absent.
  std::string Get(const std::string& name) const;
  std::vector<std::string> GetAll(const std::string& name) const;
  bool Has(const std::string& name) const { return flags.count(name) > 0; }
};

// The flags a command takes: `single` ones may appear once, `repeated`
// ones any number of times; `switches` take no value ("--check" means
// "true"; "--check=false" is allowed).
struct FlagSpec {
  std::set<std::string> single;
  std::set<std::string> repeated;
  std::set<std::string> switches;
};

// Parses argv[first..argc) against `flags`. "--help"/"-h" sets help.
absl::Status ParseArgs(int argc, char** argv, int first, const FlagSpec& flags, const std::string& command,
                       Args* out);

// The integer value of flag `name`, or `def` if it is absent;
// kInvalidArgument ("--name: 'value' is not an integer") if it is not one.
absl::StatusOr<int64_t> IntFlag(const Args& args, const std::string& name, int64_t def);

// The number value of flag `name`, or `def` if it is absent;
// kInvalidArgument ("--name: 'value' is not a number") if it is not one.
absl::StatusOr<double> DoubleFlag(const Args& args, const std::string& name, double def);

// IntFlag for tools whose usage errors exit 2 (benchmarks and their
// helpers): prints IntFlag's error to stderr and exits 2.
int64_t IntFlagOrExit(const Args& args, const std::string& name, int64_t def);

// The tail every command's entry point shares: with --help, prints `help` to
// stdout and returns 0; otherwise runs `run(args)` if `parsed` is OK, and on
// any error prints "<command>: <message>" to stderr (the message escaped:
// EscapeControl) and returns 1.
//
//   Args args;
//   absl::Status parsed = ParseArgs(argc, argv, 2, {{...}, {...}}, "shardline train", &args);
//   return RunCommand(parsed, args, kHelp, "shardline train", Train);
int RunCommand(const absl::Status& parsed, const Args& args, const char* help, const std::string& command,
               const std::function<absl::Status(const Args&)>& run);

}  // namespace shardline

#endif  // SHARDLINE_COMMON_PLATFORM_ARGS_H_
