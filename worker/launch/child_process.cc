#include "worker/launch/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/platform/env.h"
#include "common/platform/logging.h"
#include "common/encoding/text_escape.h"

namespace shardline {

ChildProcess::~ChildProcess() {
  if (pump_.joinable()) pump_.join();
}

void ChildProcess::AddArgOnce(const std::string& arg) {
  if (std::find(argv_.begin(), argv_.end(), arg) == argv_.end()) argv_.push_back(arg);
}

absl::Status ChildProcess::Start() {
  if (pump_.joinable()) pump_.join();
  int fds[2];
  if (pipe(fds) != 0) return absl::InternalError("pipe failed");
  const pid_t launcher = getpid();
  pid_ = fork();
  if (pid_ < 0) return absl::InternalError("fork failed");
  if (pid_ == 0) {
    // Children die with the launcher, however it dies (SIGKILL included):
    // nothing runs unsupervised, and launching again resumes from the
    // last committed checkpoint. Forks happen on the launcher's main
    // thread, whose exit is the process's.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != launcher) _exit(1);  // it died before prctl
    setpgid(0, 0);  // terminal Ctrl-C goes to the launcher, which decides
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    close(fds[0]);
    close(fds[1]);
    std::vector<char*> args;
    for (const std::string& a : argv_) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    fprintf(stderr, "cannot execute %s\n", args[0]);
    _exit(127);
  }
  close(fds[1]);
  running_ = true;
  pump_ = std::thread([this, fd = fds[0]] { Pump(fd); });
  return absl::OkStatus();
}

void ChildProcess::Signal(int sig) {
  if (running_) kill(pid_, sig);
}

void ChildProcess::SetArg(const std::string& flag, const std::string& value) {
  for (size_t i = 0; i + 1 < argv_.size(); ++i) {
    if (argv_[i] == flag) argv_[i + 1] = value;
  }
}

void ChildProcess::Pump(int fd) {
  // The child's log file; without one (unwritable), its lines still reach
  // launch's own output.
  absl::StatusOr<std::unique_ptr<WritableFile>> log = env_->NewAppendableFile(log_path_);
  FILE* in = fdopen(fd, "r");
  char* line = nullptr;
  size_t cap = 0;
  ssize_t n;
  while ((n = getline(&line, &cap, in)) > 0) {
    std::string text(line, static_cast<size_t>(n));
    while (!text.empty() && text.back() == '\n') text.pop_back();
    // A child's own log lines are escaped already (escaping them again
    // changes nothing); anything else it writes raw (a crash report, a
    // library's message) is escaped here, so no line from a child can drive
    // the operator's terminal or its log's reader.
    text = EscapeControl(text);
    if (log.ok() && !((*log)->Append(text + "\n").ok() && (*log)->Flush().ok())) log = absl::DataLossError("");
    // The children's own log lines already name them.
    const std::string tag = absl::StrCat("[", name_, "]");
    const std::string out =
        text.find(tag) != std::string::npos ? text + "\n" : absl::StrCat(tag, " ", text, "\n");
    logging::WriteRaw(out);
  }
  free(line);
  fclose(in);
  if (log.ok()) static_cast<void>((*log)->Close());
}

}  // namespace shardline
