// A yardstick for bench/drivers/allreduce_vs_peers.sh: the ring all-reduce that
// shardline runs (same chunks, 1 MiB segments, reduce-scatter then
// all-gather, a sender thread per rank), written straight on blocking TCP
// sockets with no framework at all. Sends go from the user buffer, the
// all-gather receives in place, the reduce-scatter receives into one
// scratch segment: the only copies are the kernel's. It shows what a ring
// over loopback TCP can reach on this machine, whoever implements it.
//
//   tcp_ring_allreduce RANK WORLD BASE_PORT SIZES ITERS
//
// Rank r listens on 127.0.0.1:BASE_PORT+r, connects to rank r+1 and accepts
// rank r-1. Rank 0 prints one JSON line per size, timed like the others
// (median over ITERS of the slowest rank, after 3 warm-up iterations).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

void Die(const char* what) {
  perror(what);
  exit(1);
}

void SendAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t k = send(fd, p, n, 0);
    if (k <= 0) Die("send");
    p += k;
    n -= static_cast<size_t>(k);
  }
}

void RecvAll(int fd, char* p, size_t n) {
  while (n > 0) {
    const ssize_t k = recv(fd, p, n, 0);
    if (k <= 0) Die("recv");
    p += k;
    n -= static_cast<size_t>(k);
  }
}

// Sends queued spans in order on its own thread, so the caller can receive
// and reduce while earlier segments are on their way.
class Sender {
 public:
  explicit Sender(int fd) : fd_(fd), thread_([this] { Run(); }) {}
  ~Sender() {
    {
      std::lock_guard<std::mutex> l(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void Enqueue(const void* p, size_t n) {
    {
      std::lock_guard<std::mutex> l(mu_);
      queue_.emplace_back(static_cast<const char*>(p), n);
    }
    cv_.notify_all();
  }
  void Drain() {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [&] { return queue_.empty() && !busy_; });
  }

 private:
  void Run() {
    std::unique_lock<std::mutex> l(mu_);
    for (;;) {
      cv_.wait(l, [&] { return done_ || !queue_.empty(); });
      if (queue_.empty()) return;
      const auto [p, n] = queue_.front();
      queue_.pop_front();
      busy_ = true;
      l.unlock();
      SendAll(fd_, p, n);
      l.lock();
      busy_ = false;
      cv_.notify_all();
    }
  }

  int fd_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<const char*, size_t>> queue_;
  bool busy_ = false, done_ = false;
  std::thread thread_;
};

int Listen(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) Die("bind");
  if (listen(fd, 4) != 0) Die("listen");
  return fd;
}

int Connect(int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  for (int attempt = 0; attempt < 600; ++attempt) {  // up to 30 s
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) return fd;
    close(fd);
    usleep(50000);
  }
  Die("connect");
  return -1;
}

struct Ring {
  int rank, world, to_next, from_prev;
};

// A max over ranks of one double around the ring (also a barrier).
double RingMax(const Ring& ring, double v) {
  double x = v;
  if (ring.rank != 0) {
    RecvAll(ring.from_prev, reinterpret_cast<char*>(&x), sizeof(x));
    x = std::max(x, v);
  }
  if (ring.rank != ring.world - 1) SendAll(ring.to_next, reinterpret_cast<char*>(&x), sizeof(x));
  // Rank N-1 has the max; pass it once more around.
  if (ring.rank == ring.world - 1) {
    SendAll(ring.to_next, reinterpret_cast<char*>(&x), sizeof(x));
  } else {
    RecvAll(ring.from_prev, reinterpret_cast<char*>(&x), sizeof(x));
    if (ring.rank != ring.world - 2) SendAll(ring.to_next, reinterpret_cast<char*>(&x), sizeof(x));
  }
  return x;
}

void AllReduce(const Ring& ring, Sender& sender, std::vector<float>& buf, std::vector<float>& scratch,
               size_t seg) {
  const int r = ring.rank, n_ranks = ring.world;
  const size_t n = buf.size();
  auto begin = [&](int c) { return n * static_cast<size_t>(c) / static_cast<size_t>(n_ranks); };
  auto chunk = [&](int k) { return ((r - k) % n_ranks + n_ranks) % n_ranks; };
  auto for_segments = [&](int c, auto fn) {
    for (size_t b = begin(c); b < begin(c + 1); b += seg) fn(b, std::min(seg, begin(c + 1) - b));
  };
  for_segments(chunk(1), [&](size_t b, size_t len) { sender.Enqueue(buf.data() + b, len * 4); });
  for (int k = 0; k <= n_ranks - 2; ++k) {
    for_segments(chunk(k + 2), [&](size_t b, size_t len) {
      RecvAll(ring.from_prev, reinterpret_cast<char*>(scratch.data()), len * 4);
      float* dst = buf.data() + b;
      for (size_t i = 0; i < len; ++i) dst[i] += scratch[i];
      sender.Enqueue(dst, len * 4);  // the next reduce-scatter step, or the all-gather's first
    });
  }
  for (int k = 0; k <= n_ranks - 2; ++k) {
    for_segments(chunk(k + 1), [&](size_t b, size_t len) {
      RecvAll(ring.from_prev, reinterpret_cast<char*>(buf.data() + b), len * 4);
      if (k + 1 <= n_ranks - 2) sender.Enqueue(buf.data() + b, len * 4);
    });
  }
  sender.Drain();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: %s RANK WORLD BASE_PORT SIZES ITERS\n", argv[0]);
    return 2;
  }
  Ring ring{atoi(argv[1]), atoi(argv[2]), -1, -1};
  const int base = atoi(argv[3]);
  const int iters = atoi(argv[5]);
  const int lfd = Listen(base + ring.rank);
  std::thread acceptor([&] { ring.from_prev = accept(lfd, nullptr, nullptr); });
  ring.to_next = Connect(base + (ring.rank + 1) % ring.world);
  acceptor.join();
  if (ring.from_prev < 0) Die("accept");
  const int one = 1;
  setsockopt(ring.to_next, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  Sender sender(ring.to_next);
  const size_t seg = (1 << 20) / 4;
  std::vector<float> scratch(seg);
  std::string sizes = argv[4];
  for (size_t at = 0; at < sizes.size();) {
    const size_t comma = std::min(sizes.find(',', at), sizes.size());
    const long bytes = atol(sizes.substr(at, comma - at).c_str());
    at = comma + 1;
    std::vector<float> input(static_cast<size_t>(bytes / 4), 1.0f), buf(input.size());
    std::vector<double> times;
    for (int it = 0; it < iters + 3; ++it) {
      std::copy(input.begin(), input.end(), buf.begin());
      RingMax(ring, 0);  // barrier
      const auto t0 = std::chrono::steady_clock::now();
      AllReduce(ring, sender, buf, scratch, seg);
      const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const double slowest = RingMax(ring, dt);
      if (it >= 3) times.push_back(slowest);
      for (size_t i = 0; i < buf.size(); ++i) {  // untimed: every element is the sum
        if (buf[i] != static_cast<float>(ring.world)) {
          fprintf(stderr, "rank %d: wrong sum %g at element %zu\n", ring.rank, buf[i], i);
          return 4;
        }
      }
    }
    if (ring.rank == 0) {
      std::sort(times.begin(), times.end());
      const double med = times[times.size() / 2], algbw = static_cast<double>(bytes) / med / 1e9;
      printf("{\"impl\":\"tcp_ring\",\"op\":\"allreduce\",\"world\":%d,\"bytes\":%ld,\"iters\":%d,"
             "\"median_s\":%.9g,\"algbw_GBps\":%.6g,\"busbw_GBps\":%.6g}\n",
             ring.world, bytes, iters, med, algbw, algbw * 2.0 * (ring.world - 1) / ring.world);
      fflush(stdout);
    }
  }
  return 0;
}
