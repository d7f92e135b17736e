#include "tests/chaos/host_process.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "tests/e2e/subprocess.h"

namespace shardline {

HostProcess::HostProcess(std::string name, std::string netns_path, std::vector<std::string> argv,
                         std::vector<std::string> env, std::string log_path)
    : name_(std::move(name)),
      netns_path_(std::move(netns_path)),
      argv_(std::move(argv)),
      env_(std::move(env)),
      log_path_(std::move(log_path)) {}

HostProcess::~HostProcess() { Kill(); }

absl::Status HostProcess::Start() {
  if (pid_ > 0) return absl::FailedPreconditionError(absl::StrCat(name_, " is already running"));
  const int ns = open(netns_path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (ns < 0) return absl::NotFoundError(absl::StrCat("cannot open ", netns_path_));
  const int log = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log < 0) {
    close(ns);
    return absl::InternalError(absl::StrCat("cannot open ", log_path_));
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(126);  // the harness died before the prctl
    if (setns(ns, CLONE_NEWNET) != 0) {
      perror("setns");
      _exit(126);
    }
    dup2(log, STDOUT_FILENO);
    dup2(log, STDERR_FILENO);
    for (const std::string& e : env_) putenv(const_cast<char*>(e.c_str()));
    ExecOrExit(argv_);
  }
  close(ns);
  close(log);
  if (pid < 0) return absl::InternalError("fork failed");
  pid_ = pid;
  ++starts_;
  return absl::OkStatus();
}

std::optional<int> HostProcess::Poll() {
  if (pid_ <= 0) return std::nullopt;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) != pid_) return std::nullopt;
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

void HostProcess::Signal(int sig) {
  if (pid_ > 0) kill(pid_, sig);
}

void HostProcess::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

}  // namespace shardline
