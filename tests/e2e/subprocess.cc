#include "tests/e2e/subprocess.h"

#include <sys/prctl.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace shardline {

std::string BinPath(const std::string& name) { return absl::StrCat(SHARDLINE_BIN_DIR, "/", name); }

Subprocess::Subprocess(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  static std::atomic<int> counter{0};
  const char* tmp = getenv("TMPDIR");
  output_path_ = absl::StrCat(tmp ? tmp : "/tmp", "/shardline-e2e-", getpid(), "-", counter++, ".log");
  const pid_t parent = getpid();
  pid_ = fork();
  if (pid_ == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(126);
    for (const std::string& e : env) putenv(const_cast<char*>(e.c_str()));
    const int fd = open(output_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    ExecOrExit(argv);
  }
}

Subprocess::~Subprocess() {
  if (pid_ > 0 && !exited_) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  std::remove(output_path_.c_str());
}

int Subprocess::Wait(absl::Duration timeout) {
  if (exited_) return exit_code_;
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    int status = 0;
    const pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      exited_ = true;
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      return exit_code_;
    }
    if (absl::Now() > deadline) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      exited_ = true;
      exit_code_ = -1;
      return -1;
    }
    usleep(10000);
  }
}

void ExecOrExit(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  execv(args[0], args.data());
  perror(("execv " + argv[0]).c_str());
  _exit(127);
}

int Subprocess::Poll() {
  if (exited_) return exit_code_;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) != pid_) return -2;
  exited_ = true;
  exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return exit_code_;
}

void Subprocess::Signal(int sig) {
  if (!exited_) kill(pid_, sig);
}

std::string Subprocess::Output() const {
  std::ifstream in(output_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace shardline
