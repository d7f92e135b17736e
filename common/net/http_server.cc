#include "common/net/http_server.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string.h>

#include <algorithm>
#include <list>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/net/listen_address.h"
#include "common/platform/logging.h"
#include "common/platform/clock.h"

namespace shardline {

// One client connection. A connection reads its request head, writes one
// reply, then drains whatever the client still sends until it closes (so
// that closing never resets a reply the client has not read yet).
struct HttpServer::Conn {
  enum class State { kReading, kWriting, kDraining };
  int fd = -1;
  std::string peer;  // the client's address bytes: the per-peer bound's key
  State state = State::kReading;
  absl::Time deadline;
  std::string in;
  std::string out;
  size_t written = 0;
};

namespace {

constexpr size_t kReadChunk = 4096;
// New connections taken per turn of the loop, so a flood of connects never
// starves the connections already open.
constexpr int kAcceptsPerTurn = 64;
// How long a connection may take to close after its reply.
constexpr absl::Duration kDrainTimeout = absl::Seconds(1);

absl::StatusOr<int> Bind(const std::string& listen, int* port) {
  std::string host = ListenHost(listen);
  const size_t colon = listen.rfind(':');
  int want_port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(listen.substr(colon + 1), &want_port) || want_port < 0 ||
      want_port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("HTTP listen address \"", listen, "\" is not HOST:PORT"));
  }
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host == "localhost") host = "127.0.0.1";
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string port_text = std::to_string(want_port);
  if (const int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), port_text.c_str(), &hints, &found); rc != 0) {
    return absl::UnavailableError(absl::StrCat("cannot serve HTTP on ", listen, ": ", gai_strerror(rc)));
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> owner(found, freeaddrinfo);
  const int fd = socket(found->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("cannot serve HTTP on ", listen, ": socket: ", strerror(errno)));
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  // A backlog deep enough for a burst of scrapers and scanners.
  if (bind(fd, found->ai_addr, found->ai_addrlen) != 0 || ::listen(fd, 512) != 0) {
    const int err = errno;
    close(fd);
    return absl::UnavailableError(
        absl::StrCat("cannot serve HTTP on ", listen, " (address in use or invalid): ", strerror(err)));
  }
  sockaddr_storage bound = {};
  socklen_t len = sizeof(bound);
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  *port = bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                                      : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  return fd;
}

}  // namespace

// The serving loop: everything here runs on the server's one thread.
class HttpServer::Loop {
 public:
  explicit Loop(HttpServer* server) : s_(server) {}
  ~Loop() {
    for (Conn& c : conns_) close(c.fd);
  }

  void Run() {
    std::vector<pollfd> fds;
    std::vector<std::list<Conn>::iterator> order;
    while (!s_->stopping_.load()) {
      fds.clear();
      order.clear();
      fds.push_back({s_->wake_fd_, POLLIN, 0});
      fds.push_back({s_->listen_fd_, POLLIN, 0});
      absl::Time next = absl::InfiniteFuture();
      for (auto it = conns_.begin(); it != conns_.end(); ++it) {
        fds.push_back({it->fd, static_cast<short>(it->state == Conn::State::kWriting ? POLLOUT : POLLIN), 0});
        order.push_back(it);
        next = std::min(next, it->deadline);
      }
      int timeout_ms = -1;
      if (next != absl::InfiniteFuture()) {
        timeout_ms = static_cast<int>(std::clamp<int64_t>(
            absl::ToInt64Milliseconds(next - MonotonicNow(s_->env_)) + 1, 0, 60'000));
      }
      const int n = poll(fds.data(), fds.size(), timeout_ms);
      if (n < 0 && errno != EINTR) {
        SLOG(ERROR) << "HTTP server poll failed: " << strerror(errno);
        return;
      }
      if (s_->stopping_.load()) return;
      for (size_t i = 0; i < order.size(); ++i) {
        if (fds[i + 2].revents != 0) Serve(order[i], fds[i + 2].revents);
      }
      if (fds[1].revents & POLLIN) Accept();
      Expire();
    }
  }

 private:
  void Close(std::list<Conn>::iterator it) {
    close(it->fd);
    if (--per_peer_[it->peer] == 0) per_peer_.erase(it->peer);
    conns_.erase(it);
  }

  // The oldest connection that has no reply under way, among all or among
  // one peer's; conns_.end() if none.
  std::list<Conn>::iterator OldestIdle(const std::string* peer) {
    for (auto it = conns_.begin(); it != conns_.end(); ++it) {
      if (it->state == Conn::State::kWriting) continue;
      if (peer == nullptr || it->peer == *peer) return it;
    }
    return conns_.end();
  }

  void Accept() {
    for (int i = 0; i < kAcceptsPerTurn; ++i) {
      sockaddr_storage addr = {};
      socklen_t len = sizeof(addr);
      const int fd = accept4(s_->listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) return;  // EAGAIN, or out of descriptors: the listen queue keeps the rest
      std::string peer;
      if (addr.ss_family == AF_INET) {
        const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
        peer.assign(reinterpret_cast<const char*>(&a->sin_addr), sizeof(a->sin_addr));
      } else if (addr.ss_family == AF_INET6) {
        const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
        peer.assign(reinterpret_cast<const char*>(&a->sin6_addr), sizeof(a->sin6_addr));
      }
      if (!MakeRoom(peer)) {
        close(fd);
        continue;
      }
      Conn c;
      c.fd = fd;
      c.peer = std::move(peer);
      c.deadline = MonotonicNow(s_->env_) + s_->options_.request_timeout;
      ++per_peer_[c.peer];
      conns_.push_back(std::move(c));
    }
  }

  // Closes the oldest idle connection of `peer` if it is at its bound, and
  // the oldest idle one of all if the server is; false if no room can be
  // made (every slot is sending a reply).
  bool MakeRoom(const std::string& peer) {
    const auto p = per_peer_.find(peer);
    if (p != per_peer_.end() && p->second >= s_->options_.max_connections_per_peer) {
      const auto victim = OldestIdle(&peer);
      if (victim == conns_.end()) return false;
      Close(victim);
    }
    if (static_cast<int>(conns_.size()) >= s_->options_.max_connections) {
      const auto victim = OldestIdle(nullptr);
      if (victim == conns_.end()) return false;
      Close(victim);
    }
    return true;
  }

  void Serve(std::list<Conn>::iterator it, short revents) {
    Conn& c = *it;
    if (c.state == Conn::State::kWriting) {
      if (revents & (POLLERR | POLLHUP | POLLNVAL) && !(revents & POLLOUT)) return Close(it);
      if (!Write(c)) return Close(it);
      if (c.written == c.out.size()) StartDraining(c);
      return;
    }
    char buf[kReadChunk];
    const ssize_t got = read(c.fd, buf, sizeof(buf));
    if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) return Close(it);
    if (got < 0) return;
    if (c.state == Conn::State::kDraining) return;  // discarded
    c.in.append(buf, static_cast<size_t>(got));
    const size_t end = HttpHeadEnd(c.in);
    const bool hopeless = end == 0 && HttpHeadCannotBeARequest(c.in);
    if (end == 0 && !hopeless && c.in.size() <= kMaxHttpHeadBytes) return;
    HttpReply reply;
    if (!hopeless && (end == 0 || end > kMaxHttpHeadBytes)) {
      reply = HeadTooLargeReply();
    } else {
      HttpRoutes routes;
      {
        MutexLock lock(&s_->mu_);
        routes = s_->routes_;
      }
      reply = AnswerHttpRequest(routes, hopeless ? absl::string_view(c.in) : absl::string_view(c.in).substr(0, end));
    }
    c.in.clear();
    c.in.shrink_to_fit();
    c.out = SerializeHttpReply(reply);
    c.state = Conn::State::kWriting;
    c.deadline = MonotonicNow(s_->env_) + s_->options_.reply_timeout;
    if (!Write(c)) return Close(it);
    if (c.written == c.out.size()) StartDraining(c);
  }

  // Writes what the socket takes; false on an error.
  static bool Write(Conn& c) {
    while (c.written < c.out.size()) {
      const ssize_t put = send(c.fd, c.out.data() + c.written, c.out.size() - c.written, MSG_NOSIGNAL);
      if (put < 0) return errno == EAGAIN || errno == EINTR;
      c.written += static_cast<size_t>(put);
    }
    return true;
  }

  void StartDraining(Conn& c) {
    shutdown(c.fd, SHUT_WR);
    c.out.clear();
    c.out.shrink_to_fit();
    c.state = Conn::State::kDraining;
    c.deadline = MonotonicNow(s_->env_) + kDrainTimeout;
  }

  void Expire() {
    const absl::Time now = MonotonicNow(s_->env_);
    for (auto it = conns_.begin(); it != conns_.end();) {
      auto next = std::next(it);
      if (it->deadline <= now) Close(it);
      it = next;
    }
  }

  HttpServer* const s_;
  std::list<Conn> conns_;  // oldest first
  std::map<std::string, int> per_peer_;
};

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(Env* env, const std::string& listen, HttpRoutes routes,
                                                              HttpServerOptions options) {
  std::unique_ptr<HttpServer> s(new HttpServer());
  s->env_ = env;
  s->options_ = options;
  {
    MutexLock lock(&s->mu_);
    s->routes_ = std::move(routes);
  }
  absl::StatusOr<int> fd = Bind(listen, &s->port_);
  if (!fd.ok()) return fd.status();
  s->listen_fd_ = *fd;
  s->wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (s->wake_fd_ < 0) return absl::InternalError(absl::StrCat("eventfd: ", strerror(errno)));
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, options.thread_stack_bytes);
  const int rc = pthread_create(&s->thread_, &attr, &HttpServer::ThreadMain, s.get());
  pthread_attr_destroy(&attr);
  if (rc != 0) return absl::ResourceExhaustedError(absl::StrCat("cannot start the HTTP thread: ", strerror(rc)));
  s->thread_started_ = true;
  return s;
}

void* HttpServer::ThreadMain(void* self) {
  Loop(static_cast<HttpServer*>(self)).Run();
  return nullptr;
}

HttpServer::~HttpServer() {
  stopping_.store(true);
  if (wake_fd_ >= 0) {
    const uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof(one));
  }
  if (thread_started_) pthread_join(thread_, nullptr);
  if (listen_fd_ >= 0) close(listen_fd_);
  if (wake_fd_ >= 0) close(wake_fd_);
}

void HttpServer::Handle(const std::string& path, HttpHandler handler) {
  MutexLock lock(&mu_);
  routes_[path] = std::move(handler);
}

}  // namespace shardline
