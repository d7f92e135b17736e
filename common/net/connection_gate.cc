#include "common/net/connection_gate.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/net/listen_address.h"
#include "common/platform/logging.h"
#include "grpcpp/server_posix.h"

namespace shardline {
namespace {

// The peer's address without its port: what the per-address bound counts.
std::string PeerAddress(const sockaddr_storage& addr) {
  char text[INET6_ADDRSTRLEN] = "?";
  if (addr.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(addr).sin_addr, text, sizeof(text));
  } else if (addr.ss_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(addr).sin6_addr, text, sizeof(text));
  }
  return text;
}

uint64_t InodeOf(int fd) {
  struct stat st;
  return fstat(fd, &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}

}  // namespace

GateVerdict AdmitConnection(int open_from_address, int open_total, const ConnectionGateOptions& options) {
  if (open_from_address >= options.max_per_address) return GateVerdict::kPerAddress;
  if (options.max_total <= 0) return GateVerdict::kAdmit;
  if (open_total >= options.max_total + options.max_total / 2) return GateVerdict::kTotal;
  if (open_from_address < options.guaranteed_per_address) return GateVerdict::kAdmit;
  return open_total >= options.max_total ? GateVerdict::kTotal : GateVerdict::kAdmit;
}

const char* GateVerdictLabel(GateVerdict v) {
  switch (v) {
    case GateVerdict::kAdmit:
      return "admit";
    case GateVerdict::kPerAddress:
      return "per_address";
    case GateVerdict::kTotal:
      return "total";
  }
  return "unknown";
}

int ConnectionBudget(int64_t descriptor_limit) {
  const int64_t left = (descriptor_limit - kDescriptorReserve) / 2;
  return static_cast<int>(std::clamp<int64_t>(left, 64, 1 << 20));
}

absl::StatusOr<std::unique_ptr<ConnectionGate>> ConnectionGate::Listen(const std::string& listen,
                                                                       ConnectionGateOptions options) {
  if (options.env == nullptr) return absl::InvalidArgumentError("a connection gate needs an Env (options.env)");
  std::string host = ListenHost(listen);
  const std::string port = listen.size() > host.size() ? listen.substr(host.size() + 1) : std::string();
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (port.empty() || getaddrinfo(IsWildcardHost(host) ? nullptr : host.c_str(), port.c_str(), &hints, &found) != 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen for gRPC on ", listen, " (not HOST:PORT)"));
  }
  // A wildcard listens on IPv6 with IPv4 mapped when it can, as gRPC does,
  // else on IPv4; a named host on the first of its addresses that binds.
  std::vector<const addrinfo*> candidates;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    if (IsWildcardHost(host) && a->ai_family == AF_INET6) {
      candidates.insert(candidates.begin(), a);
    } else {
      candidates.push_back(a);
    }
  }
  int fd = -1;
  int err = 0;
  for (const addrinfo* a : candidates) {
    fd = socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1, zero = 0;
    bool ok = fd >= 0 && setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == 0;
    if (ok && a->ai_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
    ok = ok && bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 1024) == 0;
    if (ok) break;
    err = errno;
    if (fd >= 0) close(fd);
    fd = -1;
  }
  freeaddrinfo(found);
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  if (fd < 0 || getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len) != 0) {
    if (fd >= 0) close(fd);
    return absl::UnavailableError(
        absl::StrCat("cannot listen for gRPC on ", listen, " (address in use or invalid: ", strerror(err), ")"));
  }
  const int bound_port = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6&>(bound).sin6_port
                                                            : reinterpret_cast<sockaddr_in&>(bound).sin_port);
  return std::unique_ptr<ConnectionGate>(new ConnectionGate(fd, bound_port, std::move(options)));
}

ConnectionGate::ConnectionGate(int listen_fd, int port, ConnectionGateOptions options)
    : listen_fd_(listen_fd), port_(port), options_(std::move(options)) {
  if (pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) wake_[0] = wake_[1] = -1;
}

ConnectionGate::~ConnectionGate() {
  Stop();
  close(listen_fd_);
  if (wake_[0] >= 0) close(wake_[0]);
  if (wake_[1] >= 0) close(wake_[1]);
}

void ConnectionGate::Serve(grpc::Server* server) {
  thread_ = std::thread([this, server] { Run(server); });
}

void ConnectionGate::Stop() {
  if (stopped_) return;
  stopped_ = true;
  if (wake_[1] >= 0) {
    const char byte = 1;
    if (write(wake_[1], &byte, 1) < 0) {
      // The pipe is full only if a stop is already on its way.
    }
  }
  if (thread_.joinable()) thread_.join();
}

int ConnectionGate::open() const { return open_.load(std::memory_order_relaxed); }

namespace {

// What the gate's thread holds between polls: connections that have not
// spoken yet (each with its deadline), those handed to gRPC (by
// descriptor, with the inode that tells a reused descriptor from them), and
// the open connections of each address. One thread only.
class GateBook {
 public:
  GateBook(const ConnectionGateOptions& options, grpc::Server* server)
      : options_(options), server_(server), spare_(::open("/dev/null", O_RDONLY | O_CLOEXEC)) {}
  ~GateBook() {
    for (const Pending& p : pending_) close(p.fd);
    if (spare_ >= 0) close(spare_);
  }

  // The descriptors to poll (the wake pipe, the listener, then every
  // pending connection) and the poll's timeout in milliseconds.
  std::vector<pollfd> PollSet(int wake_fd, int listen_fd, int64_t now, int* timeout_ms) const {
    std::vector<pollfd> fds = {{wake_fd, POLLIN, 0}, {listen_fd, POLLIN, 0}};
    int64_t wake_at = now + 500'000;
    for (const Pending& p : pending_) {
      fds.push_back({p.fd, POLLIN, 0});
      wake_at = std::min(wake_at, p.deadline_micros);
    }
    *timeout_ms = static_cast<int>(std::max<int64_t>(0, (wake_at - now) / 1000 + 1));
    return fds;
  }

  // Forgets the connections gRPC has closed since the last reap (twice a
  // second at most).
  void Reap(int64_t now) {
    if (now < next_reap_) return;
    for (auto it = handed_.begin(); it != handed_.end();) {
      it = InodeOf(it->first) != it->second.inode ? Forget(it) : std::next(it);
    }
    next_reap_ = now + 500'000;
  }

  // Pending connections that spoke go to gRPC; silent past their deadline
  // (or closed), closed. `fds` is PollSet's, polled.
  void Settle(const std::vector<pollfd>& fds, int64_t now) {
    std::vector<Pending> still;
    for (size_t i = 0; i < pending_.size(); ++i) {
      Pending& p = pending_[i];
      const short ev = fds[i + 2].revents;
      if ((ev & POLLIN) != 0) {
        int one = 1;
        setsockopt(p.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        handed_[p.fd] = Handed{InodeOf(p.fd), p.address};
        grpc::AddInsecureChannelFromFd(server_, p.fd);
      } else if (ev != 0 || now >= p.deadline_micros) {
        // Counted before it is closed: whoever sees the close sees the count.
        if (ev == 0) Refuse("silent");
        close(p.fd);
        Release(p.address);
      } else {
        still.push_back(std::move(p));
      }
    }
    pending_ = std::move(still);
  }

  // Up to 256 connections off the listener's queue, each admitted to wait
  // for its first bytes or closed. Out of descriptors: the spare is closed
  // to take one connection off the queue (and close it), so the loop never
  // spins on a queue it cannot empty.
  void Accept(int listen_fd, int64_t now) {
    for (int taken = 0; taken < 256; ++taken) {
      sockaddr_storage addr{};
      socklen_t len = sizeof(addr);
      const int fd = accept4(listen_fd, reinterpret_cast<sockaddr*>(&addr), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if ((errno == EMFILE || errno == ENFILE) && spare_ >= 0) {
          close(spare_);
          const int dropped = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
          Refuse("descriptors");  // before the close, as above
          if (dropped >= 0) close(dropped);
          spare_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
        }
        return;  // EAGAIN: the queue is empty; anything else: next round
      }
      if (auto stale = handed_.find(fd); stale != handed_.end()) Forget(stale);  // closed and reused
      const std::string address = PeerAddress(addr);
      const auto from = per_address_.find(address);
      const GateVerdict v = AdmitConnection(from == per_address_.end() ? 0 : from->second,
                                            static_cast<int>(handed_.size() + pending_.size()), options_);
      if (v != GateVerdict::kAdmit) {
        Refuse(GateVerdictLabel(v));  // before the close, as above
        close(fd);
        continue;
      }
      ++per_address_[address];
      pending_.push_back(Pending{fd, address, now + absl::ToInt64Microseconds(options_.first_bytes_timeout)});
    }
  }

  int handed() const { return static_cast<int>(handed_.size()); }

 private:
  struct Pending {
    int fd;
    std::string address;
    int64_t deadline_micros;
  };
  struct Handed {
    uint64_t inode;
    std::string address;
  };

  void Release(const std::string& address) {
    if (--per_address_[address] <= 0) per_address_.erase(address);
  }
  std::map<int, Handed>::iterator Forget(std::map<int, Handed>::iterator it) {
    Release(it->second.address);
    return handed_.erase(it);
  }
  void Refuse(const char* reason) {
    if (options_.on_refused) options_.on_refused(reason);
  }

  const ConnectionGateOptions& options_;
  grpc::Server* const server_;
  int spare_;
  int64_t next_reap_ = 0;
  std::vector<Pending> pending_;
  std::map<int, Handed> handed_;  // by descriptor
  std::map<std::string, int> per_address_;
};

}  // namespace

void ConnectionGate::Run(grpc::Server* server) {
  GateBook book(options_, server);
  Env* const env = options_.env;
  for (;;) {
    int timeout_ms = 0;
    std::vector<pollfd> fds = book.PollSet(wake_[0], listen_fd_, env->NowMicros(), &timeout_ms);
    if (poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR) break;
    if (fds[0].revents != 0) break;  // Stop
    const int64_t now = env->NowMicros();
    book.Reap(now);
    book.Settle(fds, now);
    if ((fds[1].revents & POLLIN) != 0) book.Accept(listen_fd_, now);
    open_.store(book.handed(), std::memory_order_relaxed);
  }
}

}  // namespace shardline
