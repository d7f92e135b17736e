// A process of the job under test, run "on" a simulated host: started in
// that host's network namespace, its output appended to a log file, killed
// if the harness dies (PR_SET_PDEATHSIG), restartable with the same argv.
#ifndef SHARDLINE_TESTS_CHAOS_HOST_PROCESS_H_
#define SHARDLINE_TESTS_CHAOS_HOST_PROCESS_H_

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace shardline {

class HostProcess {
 public:
  // `netns_path`: /run/netns/<name>; `env`: "NAME=value" added.
  HostProcess(std::string name, std::string netns_path, std::vector<std::string> argv, std::vector<std::string> env,
              std::string log_path);
  ~HostProcess();  // SIGKILLs and reaps it if it still runs

  const std::string& name() const { return name_; }
  absl::Status Start();
  // The exit code (128 + signal if killed) once it has ended; nullopt while
  // it runs (or before the first Start).
  std::optional<int> Poll();
  bool running() const { return pid_ > 0; }
  void Signal(int sig);
  // SIGKILL and reap (bounded: SIGKILL cannot be ignored; a stopped process
  // dies of it too).
  void Kill();
  int starts() const { return starts_; }

 private:
  const std::string name_, netns_path_;
  const std::vector<std::string> argv_, env_;
  const std::string log_path_;
  pid_t pid_ = -1;
  int starts_ = 0;
};

}  // namespace shardline

#endif  // SHARDLINE_TESTS_CHAOS_HOST_PROCESS_H_
