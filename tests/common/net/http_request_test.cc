#include "common/net/http_request.h"

#include <gtest/gtest.h>

#include <string>

#include "absl/strings/match.h"

namespace shardline {
namespace {

HttpRoutes Routes() {
  HttpRoutes routes;
  routes["/metrics"] = [](const HttpRequest&) {
    HttpReply r;
    r.body = "shardline_up 1\n";
    return r;
  };
  return routes;
}

int CodeOf(const std::string& head) { return AnswerHttpRequest(Routes(), head).code; }

TEST(HttpRequestTest, FindsTheEndOfTheHead) {
  EXPECT_EQ(HttpHeadEnd("GET / HTTP/1.1\r\nHost: x\r\n"), 0u);
  EXPECT_EQ(HttpHeadEnd("GET / HTTP/1.1\r\n\r\nbody"), 18u);
  EXPECT_EQ(HttpHeadEnd("GET / HTTP/1.0\n\n"), 16u);
  EXPECT_EQ(HttpHeadEnd(""), 0u);
}

TEST(HttpRequestTest, ParsesWhatPrometheusAndBrowsersSend) {
  absl::StatusOr<HttpRequest> r = ParseHttpRequest(
      "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:9100\r\nUser-Agent: Prometheus/2.42.0\r\n"
      "Accept: application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5\r\n"
      "Accept-Encoding: gzip\r\nX-Prometheus-Scrape-Timeout-Seconds: 10\r\n\r\n");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->method, "GET");
  EXPECT_EQ(r->path, "/metrics");
  r = ParseHttpRequest("HEAD /status?refresh=1#top HTTP/1.0\r\n\r\n");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->path, "/status");
  EXPECT_TRUE(r->head_only());
  r = ParseHttpRequest("GET http://example.com/metrics?x HTTP/1.1\r\n\r\n");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->path, "/metrics");
  r = ParseHttpRequest("GET http://example.com HTTP/1.1\r\n\r\n");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->path, "/");
}

TEST(HttpRequestTest, EveryRequestGetsAStatusCode) {
  EXPECT_EQ(CodeOf("GET /metrics HTTP/1.1\r\n\r\n"), 200);
  EXPECT_EQ(CodeOf("GET /favicon.ico HTTP/1.1\r\nHost: x\r\n\r\n"), 404);
  EXPECT_EQ(CodeOf("GET /metrics/extra HTTP/1.1\r\n\r\n"), 404);
  EXPECT_EQ(CodeOf("GET /../../etc/passwd HTTP/1.1\r\n\r\n"), 404);
  EXPECT_EQ(CodeOf("POST /metrics HTTP/1.1\r\nContent-Length: 3\r\n\r\n"), 405);
  EXPECT_EQ(CodeOf("OPTIONS * HTTP/1.1\r\n\r\n"), 404);
  EXPECT_EQ(CodeOf("TRACE /metrics HTTP/1.1\r\n\r\n"), 405);
  EXPECT_EQ(CodeOf("GET /metrics HTTP/2.0\r\n\r\n"), 505);
  EXPECT_EQ(CodeOf("GET /metrics\r\n\r\n"), 400);                   // HTTP/0.9
  EXPECT_EQ(CodeOf("GET  /metrics HTTP/1.1\r\n\r\n"), 400);          // two spaces
  EXPECT_EQ(CodeOf("GET /met\x01rics HTTP/1.1\r\n\r\n"), 400);       // control byte
  EXPECT_EQ(CodeOf("G(T /metrics HTTP/1.1\r\n\r\n"), 400);           // not a token
  EXPECT_EQ(CodeOf("GET metrics HTTP/1.1\r\n\r\n"), 400);            // not a path
  EXPECT_EQ(CodeOf("GET /metrics HTTP/1.1\r\nNoColon\r\n\r\n"), 400);
  EXPECT_EQ(CodeOf("GET /metrics HTTP/1.1\r\n folded\r\n\r\n"), 400);
  constexpr char kNul[] = "GET /metrics HTTP/1.1\r\nX: a\0b\r\n\r\n";
  EXPECT_EQ(CodeOf(std::string(kNul, sizeof(kNul) - 1)), 400);
  EXPECT_EQ(CodeOf("\r\n\r\n"), 400);
  EXPECT_EQ(CodeOf(""), 400);
  std::string many = "GET /metrics HTTP/1.1\r\n";
  for (int i = 0; i <= kMaxHttpHeaderLines; ++i) many += "X-A: b\r\n";
  EXPECT_EQ(CodeOf(many + "\r\n"), 400);
}

TEST(HttpRequestTest, ABinaryFirstLineIsHopelessAtOnce) {
  EXPECT_TRUE(HttpHeadCannotBeARequest("\x16\x03\x01\x00"));
  EXPECT_TRUE(HttpHeadCannotBeARequest("GET /\x1b[31m"));
  EXPECT_FALSE(HttpHeadCannotBeARequest("GET /metr"));
  EXPECT_FALSE(HttpHeadCannotBeARequest("GET /metrics HTTP/1.1\r"));
  EXPECT_FALSE(HttpHeadCannotBeARequest("GET / HTTP/1.1\r\nX: \x80"));  // header bytes: checked when whole
  EXPECT_EQ(CodeOf("\x16\x03\x01\x00"), 400);
}

TEST(HttpRequestTest, ErrorsNeverEchoTheClientsBytes) {
  const HttpReply r = AnswerHttpRequest(Routes(), "GET /<script>alert(1)</script>\x1b[31m HTTP/1.1\r\n\r\n");
  EXPECT_EQ(r.code, 400);
  EXPECT_FALSE(absl::StrContains(r.body, "script")) << r.body;
}

TEST(HttpRequestTest, HeadGetsTheHeadersWithoutTheBody) {
  const HttpReply r = AnswerHttpRequest(Routes(), "HEAD /metrics HTTP/1.1\r\n\r\n");
  EXPECT_EQ(r.code, 200);
  const std::string bytes = SerializeHttpReply(r);
  EXPECT_TRUE(absl::StrContains(bytes, "Content-Length: 15\r\n")) << bytes;
  EXPECT_TRUE(absl::EndsWith(bytes, "\r\n\r\n")) << bytes;
}

TEST(HttpRequestTest, SerializesAReply) {
  HttpReply r;
  r.code = 405;
  r.body = "no\n";
  r.headers.emplace_back("Allow", "GET, HEAD");
  EXPECT_EQ(SerializeHttpReply(r),
            "HTTP/1.1 405 Method Not Allowed\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 3\r\n"
            "Cache-Control: no-store\r\nConnection: close\r\nAllow: GET, HEAD\r\n\r\nno\n");
  EXPECT_EQ(HeadTooLargeReply().code, 431);
}

}  // namespace
}  // namespace shardline
