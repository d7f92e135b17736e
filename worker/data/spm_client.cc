#include "worker/data/spm_client.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/platform/env.h"
#include "common/platform/status_macros.h"
#include "worker/data/spm_protocol.h"

extern char** environ;

namespace shardline {

// The helper and every reader of a tokenizer share one bound.
static_assert(spm::kMaxModelBytes == static_cast<uint64_t>(kMaxTokenizerFileBytes));

namespace {
// The least a serialized SentencePiece piece takes in its model: the
// repeated field's tag and length, and its text's tag and length.
constexpr uint64_t kMinPieceBytes = 4;

// From /proc/<pid>/stat: the process's state letter and its CPU time
// (user + system, in clock ticks); false if it cannot be read.
bool ReadProcStat(pid_t pid, char* state, int64_t* cpu_ticks) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(pid));
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[1024];
  const ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  // "pid (comm) S ppid ...": comm may hold spaces; the state follows the
  // last ')'. utime and stime are fields 14 and 15, 11 and 12 after it.
  const char* p = std::strrchr(buf, ')');
  if (p == nullptr || p[1] != ' ') return false;
  *state = p[2];
  long long utime = 0, stime = 0;
  if (std::sscanf(p + 3, "%*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %lld %lld", &utime, &stime) != 2) return false;
  *cpu_ticks = utime + stime;
  return true;
}

// The Env's monotonic clock, in milliseconds.
int64_t NowMillis(Env* env) { return env->NowMicros() / 1000; }

template <typename T>
void Put(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(v));
}

}  // namespace

std::vector<std::string> SpmHelperPaths() {
  std::vector<std::string> paths;
  if (const char* env = std::getenv("SHARDLINE_SPM_HELPER"); env != nullptr && *env != '\0') paths.push_back(env);
  paths.push_back(ExecutableDir() + "/shardline-spm");
#ifdef SHARDLINE_SPM_HELPER_BUILD_PATH
  paths.push_back(SHARDLINE_SPM_HELPER_BUILD_PATH);
#endif
  return paths;
}

absl::StatusOr<std::unique_ptr<SpmClient>> SpmClient::Start(Env* env, const SpmClientOptions& options) {
  std::string path;
  for (const std::string& p : SpmHelperPaths()) {
    if (access(p.c_str(), X_OK) == 0) {
      path = p;
      break;
    }
  }
  if (path.empty()) {
    return absl::NotFoundError(absl::StrCat("shardline-spm, the helper that runs SentencePiece, is not in any of: ",
                                            absl::StrJoin(SpmHelperPaths(), ", "),
                                            " (it is built beside shardline; $SHARDLINE_SPM_HELPER names another)"));
  }
  // A helper that dies makes writes to it fail with EPIPE, not end us.
  signal(SIGPIPE, SIG_IGN);
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) != 0) return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  if (pipe2(out, O_CLOEXEC) != 0) {
    close(in[0]);
    close(in[1]);
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  char arg0[] = "shardline-spm";
  char arg1[] = "serve";
  char* argv[] = {arg0, arg1, nullptr};
  pid_t pid = -1;
  const int err = posix_spawn(&pid, path.c_str(), &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  close(in[0]);
  close(out[1]);
  if (err != 0) {
    close(in[1]);
    close(out[0]);
    return absl::InternalError(absl::StrCat("starting ", path, ": ", std::strerror(err)));
  }
  fcntl(in[1], F_SETFL, fcntl(in[1], F_GETFL) | O_NONBLOCK);  // Send waits with a deadline
  std::unique_ptr<SpmClient> c(new SpmClient());
  c->env_ = env;
  c->options_ = options;
  c->pid_ = pid;
  c->to_helper_ = in[1];
  c->from_helper_ = out[0];
  c->path_ = path;
  return c;
}

SpmClient::~SpmClient() {
  if (to_helper_ >= 0) close(to_helper_);
  if (from_helper_ >= 0) close(from_helper_);
  if (pid_ <= 0) return;
  // It exits at the end of its input; a stuck one is killed.
  for (int i = 0; i < 200; ++i) {
    if (waitpid(pid_, nullptr, WNOHANG) == pid_) return;
    env_->SleepForMicros(10000);
  }
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
}

absl::Status SpmClient::Broken(absl::StatusCode code, const std::string& what) {
  broken_ = true;
  return absl::Status(code, absl::StrCat(path_, " (SentencePiece's helper) ", what));
}

void SpmClient::StartWaiting() {
  cpu_ticks_ = -1;
  progressed_ms_ = NowMillis(env_);
}

absl::Status SpmClient::CheckAlive() {
  char state = '?';
  int64_t ticks = 0;
  const int64_t now = NowMillis(env_);
  if (!ReadProcStat(pid_, &state, &ticks)) return absl::OkStatus();  // gone: the pipe says so
  // Waiting on its disk (D) is progress of a kind; so is CPU time.
  if (state == 'D' || (ticks != cpu_ticks_ && state != 'T' && state != 't')) progressed_ms_ = now;
  cpu_ticks_ = ticks;
  if (now - progressed_ms_ < options_.liveness_millis) return absl::OkStatus();
  return Broken(absl::StatusCode::kDeadlineExceeded,
                absl::StrCat("made no progress for ", (now - progressed_ms_) / 1000, " s (process ", pid_, " is ",
                             state == 'T' || state == 't' ? "stopped: SIGSTOP, or a debugger"
                                                          : "not running: its CPU time stood still",
                             "); it was ended"));
}

absl::Status SpmClient::Send(absl::string_view bytes) {
  if (broken_) return Broken(absl::StatusCode::kFailedPrecondition, "failed before");
  const int64_t deadline = NowMillis(env_) + options_.request_millis;
  StartWaiting();
  while (!bytes.empty()) {
    const ssize_t w = write(to_helper_, bytes.data(), bytes.size());
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EAGAIN) {  // its pipe is full: wait, but not forever
      const int64_t left = deadline - NowMillis(env_);
      if (left <= 0) return Broken(absl::StatusCode::kDeadlineExceeded, "stopped reading its input");
      RETURN_IF_ERROR(CheckAlive());
      pollfd pfd{to_helper_, POLLOUT, 0};
      poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
      continue;
    }
    if (w <= 0) return Broken(absl::StatusCode::kUnavailable, absl::StrCat("stopped reading (", std::strerror(errno), "): did it die?"));
    bytes.remove_prefix(static_cast<size_t>(w));
  }
  return absl::OkStatus();
}

absl::Status SpmClient::Receive(void* dst, size_t n, int64_t deadline_ms) {
  auto* p = static_cast<char*>(dst);
  StartWaiting();
  while (n > 0) {
    const int64_t left = deadline_ms - NowMillis(env_);
    if (left <= 0) return Broken(absl::StatusCode::kDeadlineExceeded, "gave no reply in time");
    RETURN_IF_ERROR(CheckAlive());
    pollfd pfd{from_helper_, POLLIN, 0};
    const int ready = poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    StartWaiting();  // bytes came: it is alive
    const ssize_t r = read(from_helper_, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return Broken(absl::StatusCode::kUnavailable, "ended its output mid-reply: it died");
    p += r;
    n -= static_cast<size_t>(r);
  }
  return absl::OkStatus();
}

absl::Status SpmClient::ReplyStatus(int64_t deadline_ms, const char* what) {
  uint32_t status = 0;
  RETURN_IF_ERROR(Receive(&status, sizeof(status), deadline_ms));
  if (status == 0) return absl::OkStatus();
  uint32_t len = 0;
  RETURN_IF_ERROR(Receive(&len, sizeof(len), deadline_ms));
  if (len > spm::kMaxMessageBytes) return Broken(absl::StatusCode::kDataLoss, "sent an error too long to be one");
  std::string message(len, '\0');
  RETURN_IF_ERROR(Receive(message.data(), len, deadline_ms));
  return absl::InvalidArgumentError(absl::StrCat(what, ": SentencePiece says: ", message));
}

absl::StatusOr<int64_t> SpmClient::Call(absl::string_view header, absl::string_view body, int64_t millis,
                                         const char* what) {
  RETURN_IF_ERROR(Send(header));
  RETURN_IF_ERROR(Send(body));
  const int64_t deadline = NowMillis(env_) + millis;
  RETURN_IF_ERROR(ReplyStatus(deadline, what));
  return deadline;
}

absl::StatusOr<std::string> SpmClient::Train(const std::map<std::string, std::string>& flags, uint32_t seed) {
  std::string req(1, spm::kOpTrain);
  Put<uint32_t>(&req, seed);
  Put<uint32_t>(&req, static_cast<uint32_t>(flags.size()));
  for (const auto& [name, value] : flags) {
    Put<uint32_t>(&req, static_cast<uint32_t>(name.size()));
    req += name;
    Put<uint32_t>(&req, static_cast<uint32_t>(value.size()));
    req += value;
  }
  ASSIGN_OR_RETURN(const int64_t deadline, Call(req, "", options_.train_millis, "training"));
  uint64_t size = 0;
  RETURN_IF_ERROR(Receive(&size, sizeof(size), deadline));
  if (size > spm::kMaxModelBytes) return Broken(absl::StatusCode::kDataLoss, absl::StrCat("sent a model of ", size, " bytes"));
  std::string model(static_cast<size_t>(size), '\0');
  RETURN_IF_ERROR(Receive(model.data(), model.size(), deadline));
  return model;
}

absl::StatusOr<std::vector<SpmPiece>> SpmClient::Load(absl::string_view model) {
  if (model.size() > spm::kMaxModelBytes) {
    return absl::InvalidArgumentError(absl::StrCat("a model of ", model.size(), " bytes is over the ",
                                                   spm::kMaxModelBytes, " a tokenizer may have"));
  }
  std::string req(1, spm::kOpLoad);
  Put<uint64_t>(&req, model.size());
  ASSIGN_OR_RETURN(const int64_t deadline, Call(req, model, options_.request_millis, "loading"));
  int32_t vocab = 0;
  RETURN_IF_ERROR(Receive(&vocab, sizeof(vocab), deadline));
  // Bounded by memory, not by a count (issue 62: a helper claiming 2^28
  // pieces made this allocate ~10 GiB): a model holds each piece's text
  // and a score, at least kMinPieceBytes of it, so it cannot name more
  // pieces than that, nor more piece text than its own size; and the list
  // grows only as pieces arrive.
  if (vocab < 0 || static_cast<uint64_t>(vocab) > model.size() / kMinPieceBytes) {
    return Broken(absl::StatusCode::kDataLoss,
                  absl::StrCat("sent a vocabulary of ", vocab, " for a model of ", model.size(), " bytes"));
  }
  std::vector<SpmPiece> pieces;
  pieces.reserve(static_cast<size_t>(std::min(vocab, 1 << 16)));
  uint64_t text_bytes = 0;
  for (int32_t i = 0; i < vocab; ++i) {
    SpmPiece& p = pieces.emplace_back();
    uint32_t len = 0;
    RETURN_IF_ERROR(Receive(&p.kind, 1, deadline));
    RETURN_IF_ERROR(Receive(&len, sizeof(len), deadline));
    text_bytes += len;
    if (len > spm::kMaxMessageBytes || text_bytes > model.size()) {
      return Broken(absl::StatusCode::kDataLoss,
                    absl::StrCat("sent pieces of more text (", text_bytes, " bytes) than the model has"));
    }
    p.text.resize(len);
    RETURN_IF_ERROR(Receive(p.text.data(), len, deadline));
  }
  return pieces;
}

absl::Status SpmClient::Encode(absl::string_view text, std::vector<int32_t>* ids) {
  if (text.size() > spm::kMaxTextBytes) return absl::InvalidArgumentError("a text over 64 MiB to encode at once");
  std::string req(1, spm::kOpEncode);
  Put<uint32_t>(&req, static_cast<uint32_t>(text.size()));
  ASSIGN_OR_RETURN(const int64_t deadline, Call(req, text, options_.request_millis, "encoding"));
  uint32_t count = 0;
  RETURN_IF_ERROR(Receive(&count, sizeof(count), deadline));
  if (count > text.size() * 4 + 16) return Broken(absl::StatusCode::kDataLoss, absl::StrCat("sent ", count, " ids for ", text.size(), " bytes"));
  const size_t old = ids->size();
  ids->resize(old + count);
  return Receive(ids->data() + old, count * sizeof(int32_t), deadline);
}

}  // namespace shardline
