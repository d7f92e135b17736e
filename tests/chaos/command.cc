#include "tests/chaos/command.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "tests/e2e/subprocess.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"

namespace shardline {

absl::Status RunCommand(const std::vector<std::string>& argv) {
  char path[] = "/tmp/shardline-chaos-cmd-XXXXXX";
  const int out = mkstemp(path);
  if (out < 0) return absl::InternalError("mkstemp failed");
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(out, STDOUT_FILENO);
    dup2(out, STDERR_FILENO);
    ExecOrExit(argv);
  }
  int status = 0;
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  bool done = false;
  while (!done && absl::Now() < deadline) {
    done = waitpid(pid, &status, WNOHANG) == pid;
    if (!done) absl::SleepFor(absl::Milliseconds(5));
  }
  if (!done) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  std::string output;
  char buf[4096];
  lseek(out, 0, SEEK_SET);
  for (ssize_t n; (n = read(out, buf, sizeof(buf))) > 0;) output.append(buf, static_cast<size_t>(n));
  close(out);
  unlink(path);
  if (done && WIFEXITED(status) && WEXITSTATUS(status) == 0) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("`", absl::StrJoin(argv, " "), "` ",
                                          !done ? "did not finish in 30 s" : absl::StrCat("exited with status ", status),
                                          output.empty() ? "" : ": ", output));
}

}  // namespace shardline
