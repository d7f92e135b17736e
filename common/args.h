// Command-line parsing for `shardline <command>`: "--name=value" and
// "--name value", repeatable flags, and positional arguments. Unknown flags
// are errors that name the flag and the command.
//
//   Args args;
//   RETURN_IF_ERROR(ParseArgs(argc, argv, {"config", "workdir"}, {"set"}, "shardline train", &args));
//   std::string config = args.Get("config");
#ifndef SHARDLINE_COMMON_ARGS_H_
#define SHARDLINE_COMMON_ARGS_H_

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"

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

// Parses argv[first..argc). `single` flags may appear once, `repeated` ones
// any number of times; `switches` take no value ("--check" means "true";
// "--check=false" is allowed). "--help"/"-h" sets help.
absl::Status ParseArgs(int argc, char** argv, int first, const std::set<std::string>& single,
                       const std::set<std::string>& repeated, const std::string& command,
                       Args* out, const std::set<std::string>& switches = {});

}  // namespace shardline

#endif  // SHARDLINE_COMMON_ARGS_H_
