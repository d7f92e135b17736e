#include "common/platform/args.h"

#include <cstdio>
#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/encoding/text_escape.h"

namespace shardline {

std::string Args::Get(const std::string& name) const {
  auto it = flags.find(name);
  return it == flags.end() || it->second.empty() ? "" : it->second.back();
}

std::vector<std::string> Args::GetAll(const std::string& name) const {
  auto it = flags.find(name);
  return it == flags.end() ? std::vector<std::string>{} : it->second;
}

absl::Status ParseArgs(int argc, char** argv, int first, const FlagSpec& flags, const std::string& command,
                       Args* out) {
  const std::set<std::string>& single = flags.single;
  const std::set<std::string>& repeated = flags.repeated;
  const std::set<std::string>& switches = flags.switches;
  for (int i = first; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      out->help = true;
      continue;
    }
    if (!absl::StartsWith(arg, "--")) {
      out->positional.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2), value;
    const size_t eq = name.find('=');
    bool has_value = eq != std::string::npos;
    if (has_value) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    if (switches.count(name)) {
      out->flags[name].push_back(has_value ? value : "true");
      continue;
    }
    if (!single.count(name) && !repeated.count(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag --", name, " for '", command, "' (see ", command, " --help)"));
    }
    if (!has_value) {
      if (i + 1 >= argc) {
        return absl::InvalidArgumentError(
            absl::StrCat("flag --", name, " of '", command, "' needs a value"));
      }
      value = argv[++i];
    }
    if (single.count(name) && out->flags.count(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("flag --", name, " of '", command, "' given twice"));
    }
    out->flags[name].push_back(value);
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> IntFlag(const Args& args, const std::string& name, int64_t def) {
  if (!args.Has(name)) return def;
  int64_t v;
  if (!absl::SimpleAtoi(args.Get(name), &v)) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, ": '", args.Get(name), "' is not an integer"));
  }
  return v;
}

absl::StatusOr<double> DoubleFlag(const Args& args, const std::string& name, double def) {
  if (!args.Has(name)) return def;
  double v;
  if (!absl::SimpleAtod(args.Get(name), &v)) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, ": '", args.Get(name), "' is not a number"));
  }
  return v;
}

int64_t IntFlagOrExit(const Args& args, const std::string& name, int64_t def) {
  absl::StatusOr<int64_t> v = IntFlag(args, name, def);
  if (!v.ok()) {
    std::fprintf(stderr, "%s\n", EscapeControl(v.status().message()).c_str());
    std::exit(2);
  }
  return *v;
}

int RunCommand(const absl::Status& parsed, const Args& args, const char* help, const std::string& command,
               const std::function<absl::Status(const Args&)>& run) {
  if (args.help) {
    std::fputs(help, stdout);
    return 0;
  }
  const absl::Status status = parsed.ok() ? run(args) : parsed;
  if (status.ok()) return 0;
  // A status may carry text from outside (a member's fatal error, a file's
  // contents): escaped, so it cannot forge a log line or drive the terminal.
  std::fprintf(stderr, "%s: %s\n", command.c_str(), EscapeControl(status.message()).c_str());
  return 1;
}

}  // namespace shardline
