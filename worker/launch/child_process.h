// A child process of `shardline launch`: started (and restarted) from its
// argv, with its stdout and stderr lines prefixed by its name, echoed to the
// launcher's stderr and appended to a log file. It dies with the launcher,
// however the launcher dies.
#ifndef SHARDLINE_WORKER_LAUNCH_CHILD_PROCESS_H_
#define SHARDLINE_WORKER_LAUNCH_CHILD_PROCESS_H_

#include <sys/types.h>

#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "common/platform/env.h"

namespace shardline {

class ChildProcess {
 public:
  // `env` (where the log file is written) must outlive it.
  ChildProcess(Env* env, std::string name, std::vector<std::string> argv, const std::string& log_path)
      : env_(env), name_(std::move(name)), argv_(std::move(argv)), log_path_(log_path) {}
  ~ChildProcess();

  // For the next Start(), once.
  void AddArgOnce(const std::string& arg);

  // Forks and execs argv, its output pumped by a thread of this object. The
  // child gets its own process group (a terminal's Ctrl-C reaches only the
  // launcher, which decides) and SIGKILL when the launcher dies. Call from
  // the launcher's main thread. The caller reaps it (waitpid) and then
  // calls Exited().
  absl::Status Start();

  // Sends `sig` if the child is running; otherwise nothing.
  void Signal(int sig);
  pid_t pid() const { return pid_; }
  bool running() const { return running_; }
  // Replaces an argument's value for the next Start (e.g. a fixed port).
  void SetArg(const std::string& flag, const std::string& value);
  void Exited() { running_ = false; }
  const std::string& name() const { return name_; }

 private:
  void Pump(int fd);

  Env* const env_;
  const std::string name_;
  std::vector<std::string> argv_;
  const std::string log_path_;
  pid_t pid_ = -1;
  bool running_ = false;
  std::thread pump_;
};

}  // namespace shardline

#endif  // SHARDLINE_WORKER_LAUNCH_CHILD_PROCESS_H_
