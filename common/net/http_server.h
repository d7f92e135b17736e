// A small HTTP/1.x server for read-only pages (/metrics, /healthz, /status):
// one thread polling every connection, so a client that connects and never
// finishes its request costs a file descriptor, not a serving thread.
//
//   HttpRoutes routes;
//   routes["/healthz"] = [](const HttpRequest&) { return HttpReply{200, "text/plain", "ok\n"}; };
//   ASSIGN_OR_RETURN(auto server, HttpServer::Start(env, "127.0.0.1:0", routes));
//   SLOG(INFO) << "serving on port " << server->port();
//
// Every request gets a status code (common/net/http_request.h decides which) and
// then the connection is closed. Why not civetweb (under prometheus-cpp):
// Debian builds it with a fixed 100 KiB thread stack, and a process that
// links OpenBLAS loses about 60 KiB of every thread's stack to OpenBLAS's
// static TLS; civetweb's own error replies then overflowed it, so one
// request for /favicon.ico killed a worker (docs/security.md). This server's
// thread has an explicit stack (HttpServerOptions::thread_stack_bytes).
#ifndef SHARDLINE_COMMON_NET_HTTP_SERVER_H_
#define SHARDLINE_COMMON_NET_HTTP_SERVER_H_

#include <pthread.h>

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/net/http_request.h"
#include "common/platform/env.h"
#include "common/platform/mutex.h"

namespace shardline {

struct HttpServerOptions {
  // Connections open at once. A new connection past it closes the oldest
  // one that has not finished sending its request (it never will, or it is
  // slow), so a scraper always gets in while others hang.
  int max_connections = 256;
  // The same, per client address: one host cannot hold every slot.
  int max_connections_per_peer = 64;
  // From accepting a connection to its whole request head; past it the
  // connection is closed without a reply.
  absl::Duration request_timeout = absl::Seconds(2);
  // To send the reply once the request is in; past it the connection is
  // closed (a client that does not read).
  absl::Duration reply_timeout = absl::Seconds(10);
  // The serving thread's stack. glibc takes the process's static TLS out of
  // it (about 60 KiB where OpenBLAS is linked); what is left is ten times
  // what serving a request uses.
  size_t thread_stack_bytes = 1 << 20;
};

class HttpServer {
 public:
  // Binds `listen` ("HOST:PORT", IPv4 or a bracketed IPv6 host, port 0 picks
  // a free one; "localhost" is 127.0.0.1) and serves `routes` on a thread of
  // its own. An address in use or unresolvable is kUnavailable naming it.
  // `env` (its clock: the timeouts) must outlive the server.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(Env* env, const std::string& listen, HttpRoutes routes,
                                                           HttpServerOptions options = {});
  // Stops serving: closes every connection and joins the thread.
  ~HttpServer();

  int port() const { return port_; }

  // Adds (or replaces) a route. Thread-safe; requests already being
  // answered keep the old handler.
  void Handle(const std::string& path, HttpHandler handler);

 private:
  struct Conn;
  class Loop;
  HttpServer() = default;
  static void* ThreadMain(void* self);

  Env* env_ = nullptr;
  HttpServerOptions options_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;
  int port_ = 0;
  pthread_t thread_{};
  bool thread_started_ = false;
  std::atomic<bool> stopping_{false};
  Mutex mu_;
  HttpRoutes routes_ ABSL_GUARDED_BY(mu_);
};

}  // namespace shardline

#endif  // SHARDLINE_COMMON_NET_HTTP_SERVER_H_
