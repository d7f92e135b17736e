// Runs real processes for end-to-end tests: start with a bounded lifetime,
// capture combined stdout+stderr to a file, wait with a timeout, signal.
//
//   Subprocess p({bin, "train", "--config", cfg, "--workdir", dir});
//   int code = p.Wait(absl::Seconds(60));   // kills with SIGKILL on timeout
//   std::string log = p.Output();
#ifndef SHARDLINE_TESTS_E2E_SUBPROCESS_H_
#define SHARDLINE_TESTS_E2E_SUBPROCESS_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/time/time.h"

namespace shardline {

class Subprocess {
 public:
  // Starts argv[0] (a path) with argv and, added to this process's
  // environment, `env` ("NAME=value"); output goes to a temp file. The
  // process is killed if the one that started it dies (PR_SET_PDEATHSIG).
  explicit Subprocess(const std::vector<std::string>& argv, const std::vector<std::string>& env = {});
  ~Subprocess();  // SIGKILLs the process if it still runs

  pid_t pid() const { return pid_; }
  // Waits for exit. Returns the exit code, 128+signal if killed by a signal,
  // or -1 after killing it because `timeout` passed.
  int Wait(absl::Duration timeout);
  // The exit code as Wait returns it, once the process has ended; -2 while
  // it runs.
  int Poll();
  void Signal(int sig);
  // Everything the process wrote so far.
  std::string Output() const;

 private:
  pid_t pid_ = -1;
  bool exited_ = false;
  int exit_code_ = 0;
  std::string output_path_;
};

// The path of a built binary, e.g. BinPath("shardline").
std::string BinPath(const std::string& name);

// In a forked child: execv(argv[0], argv); if that fails, says why on
// stderr and _exit(127).
[[noreturn]] void ExecOrExit(const std::vector<std::string>& argv);

}  // namespace shardline

#endif  // SHARDLINE_TESTS_E2E_SUBPROCESS_H_
