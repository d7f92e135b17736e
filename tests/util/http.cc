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

absl::StatusOr<HttpResponse> HttpFetch(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError("socket");
  struct timeval tv = {5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return absl::UnavailableError(absl::StrCat("connect to port ", port));
  }
  const std::string req = absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
  if (write(fd, req.data(), req.size()) != static_cast<ssize_t>(req.size())) {
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

absl::StatusOr<std::string> HttpGet(int port, const std::string& path) {
  absl::StatusOr<HttpResponse> r = HttpFetch(port, path);
  if (!r.ok()) return r.status();
  if (r->code != 200) return absl::UnavailableError(absl::StrCat("HTTP ", r->code, " for ", path));
  return std::move(r->body);
}

}  // namespace shardline
