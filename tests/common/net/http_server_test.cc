#include "common/net/http_server.h"

#include <errno.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "tests/util/http.h"

namespace shardline {
namespace {

HttpRoutes OnePage(const std::string& body) {
  HttpRoutes routes;
  routes["/page"] = [body](const HttpRequest&) {
    HttpReply r;
    r.body = body;
    return r;
  };
  return routes;
}

// A connection to 127.0.0.1:<port> that has sent `bytes`; reads wait 5 s.
int Open(int port, const std::string& bytes) {
  const int fd = ConnectLoopback(port);
  EXPECT_GE(fd, 0);
  if (fd >= 0 && !bytes.empty()) {
    EXPECT_EQ(write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  }
  return fd;
}

// True if the server closed `fd` without a reply (read sees EOF or a reset
// within 5 s).
bool ClosedWithoutReply(int fd) {
  char buf[64];
  const ssize_t n = read(fd, buf, sizeof(buf));
  return n == 0 || (n < 0 && errno == ECONNRESET);
}

TEST(HttpServerTest, AnUnfinishedRequestIsDroppedAfterTheTimeout) {
  HttpServerOptions options;
  options.request_timeout = absl::Milliseconds(100);
  auto server = HttpServer::Start(Env::Default(), "127.0.0.1:0", OnePage("x"), options);
  ASSERT_TRUE(server.ok()) << server.status();
  const int fd = Open((*server)->port(), "GET /page HTTP/1.1\r\n");
  EXPECT_TRUE(ClosedWithoutReply(fd));
  close(fd);
}

TEST(HttpServerTest, OnePeerPastItsBoundLosesItsOldestUnfinishedConnection) {
  HttpServerOptions options;
  options.max_connections_per_peer = 3;
  options.request_timeout = absl::Seconds(30);  // only the bound can close them
  auto server = HttpServer::Start(Env::Default(), "127.0.0.1:0", OnePage("hello"), options);
  ASSERT_TRUE(server.ok()) << server.status();
  std::vector<int> held;
  for (int i = 0; i < 3; ++i) held.push_back(Open((*server)->port(), "GET /page HTTP/1.1\r\n"));
  absl::StatusOr<HttpResponse> r = HttpExchange((*server)->port(), "GET /page HTTP/1.0\r\n\r\n");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->body, "hello");
  EXPECT_TRUE(ClosedWithoutReply(held[0]));
  for (int fd : held) close(fd);
}

TEST(HttpServerTest, TheWholeServerPastItsBoundServesNewcomers) {
  HttpServerOptions options;
  options.max_connections = 4;
  options.request_timeout = absl::Seconds(30);
  auto server = HttpServer::Start(Env::Default(), "127.0.0.1:0", OnePage("hello"), options);
  ASSERT_TRUE(server.ok()) << server.status();
  std::vector<int> held;
  for (int i = 0; i < 10; ++i) held.push_back(Open((*server)->port(), "GET /pa"));
  absl::StatusOr<HttpResponse> r = HttpExchange((*server)->port(), "GET /page HTTP/1.0\r\n\r\n");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->code, 200);
  for (int fd : held) close(fd);
}

TEST(HttpServerTest, RoutesAddedLaterAreServed) {
  auto server = HttpServer::Start(Env::Default(), "127.0.0.1:0", {});
  ASSERT_TRUE(server.ok()) << server.status();
  absl::StatusOr<HttpResponse> r = HttpFetch((*server)->port(), "/late");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->code, 404);
  (*server)->Handle("/late", [](const HttpRequest&) {
    HttpReply reply;
    reply.body = "here";
    return reply;
  });
  r = HttpFetch((*server)->port(), "/late");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->code, 200);
  EXPECT_EQ(r->body, "here");
}

TEST(HttpServerTest, BadAddressesAreClearErrors) {
  auto first = HttpServer::Start(Env::Default(), "127.0.0.1:0", {});
  ASSERT_TRUE(first.ok());
  const std::string taken = "127.0.0.1:" + std::to_string((*first)->port());
  auto second = HttpServer::Start(Env::Default(), taken, {});
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(second.status().message(), taken)) << second.status();
  EXPECT_FALSE(HttpServer::Start(Env::Default(), "127.0.0.1", {}).ok());
  EXPECT_FALSE(HttpServer::Start(Env::Default(), "127.0.0.1:99999", {}).ok());
  EXPECT_FALSE(HttpServer::Start(Env::Default(), "no.such.host.invalid:0", {}).ok());
  EXPECT_TRUE(HttpServer::Start(Env::Default(), "localhost:0", {}).ok());
}

}  // namespace
}  // namespace shardline
