#include "tests/util/http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace shardline {

int ConnectLoopback(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  struct timeval tv = {5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

absl::StatusOr<HttpResponse> HttpExchange(int port, const std::string& request) {
  const int fd = ConnectLoopback(port);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("connect to port ", port));
  if (write(fd, request.data(), request.size()) != static_cast<ssize_t>(request.size())) {
    close(fd);
    return absl::UnavailableError("write");
  }
  std::string response;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) response.append(buf, static_cast<size_t>(n));
  close(fd);
  const size_t body = response.find("\r\n\r\n");
  if (!absl::StartsWith(response, "HTTP/1.") || body == std::string::npos) {
    return absl::DataLossError(absl::StrCat("bad HTTP response: ", response.substr(0, 80)));
  }
  HttpResponse out;
  const size_t space = response.find(' ');
  if (space == std::string::npos || !absl::SimpleAtoi(response.substr(space + 1, 3), &out.code)) {
    return absl::DataLossError(absl::StrCat("bad HTTP status line: ", response.substr(0, 80)));
  }
  out.body = response.substr(body + 4);
  return out;
}

absl::StatusOr<HttpResponse> HttpFetch(int port, const std::string& path) {
  return HttpExchange(port, absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n"));
}

absl::StatusOr<std::string> HttpGet(int port, const std::string& path) {
  absl::StatusOr<HttpResponse> r = HttpFetch(port, path);
  if (!r.ok()) return r.status();
  if (r->code != 200) return absl::UnavailableError(absl::StrCat("HTTP ", r->code, " for ", path));
  return std::move(r->body);
}

int HoldUnfinishedHttpRequest(int port) {
  const int fd = ConnectLoopback(port);
  if (fd >= 0) {
    const std::string partial = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n";  // no blank line: unfinished
    (void)!write(fd, partial.data(), partial.size());
  }
  return fd;
}

std::vector<std::pair<std::string, std::string>> HostileHttpRequests() {
  const std::string browser =
      "Host: 127.0.0.1\r\nUser-Agent: Mozilla/5.0 (X11; Linux x86_64) Chrome/120.0\r\n"
      "Accept: image/avif,image/webp,*/*\r\nAccept-Encoding: gzip, deflate, br\r\nConnection: keep-alive\r\n"
      "Referer: http://127.0.0.1/status\r\n\r\n";
  std::string many_headers = "GET /metrics HTTP/1.1\r\n";
  for (int i = 0; i < 200; ++i) absl::StrAppend(&many_headers, "X-", i, ": y\r\n");
  many_headers += "\r\n";
  const char tls_hello[] = "\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03\x00\x01\x02\x03";
  return {
      {"browser favicon", "GET /favicon.ico HTTP/1.1\r\n" + browser},
      {"browser root", "GET / HTTP/1.1\r\n" + browser},
      {"POST /metrics", "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\nhello=world"},
      {"PUT /healthz", "PUT /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"},
      {"OPTIONS *", "OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n"},
      {"TRACE", "TRACE /metrics HTTP/1.1\r\nHost: x\r\n\r\n"},
      {"traversal", "GET /../../../../etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n"},
      {"absolute form", "GET http://evil.example/metrics HTTP/1.1\r\nHost: evil.example\r\n\r\n"},
      {"HTTP/0.9", "GET /metrics\r\n\r\n"},
      {"HTTP/2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"},
      {"TLS ClientHello", std::string(tls_hello, sizeof(tls_hello) - 1)},
      {"control bytes", "GET /\x1b[31mred\x07 HTTP/1.1\r\n\r\n"},
      {"64 KiB header", "GET /metrics HTTP/1.1\r\nX-Big: " + std::string(64 * 1024, 'a') + "\r\n\r\n"},
      {"200 header lines", many_headers},
      {"bare newlines", "GET /nothing HTTP/1.0\n\n"},
      {"Prometheus scrape",
       "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: Prometheus/2.42.0\r\n"
       "Accept: application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5,*/*;q=0.1\r\n"
       "Accept-Encoding: gzip\r\nX-Prometheus-Scrape-Timeout-Seconds: 10\r\n\r\n"},
  };
}

}  // namespace shardline
