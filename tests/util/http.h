// A minimal HTTP/1.0 client for tests that scrape /metrics or send odd requests.
#ifndef SHARDLINE_TESTS_UTIL_HTTP_H_
#define SHARDLINE_TESTS_UTIL_HTTP_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace shardline {

struct HttpResponse {
  int code = 0;
  std::string body;
};
// Sends `request` as it is to 127.0.0.1:<port> and reads the response until
// the server closes (5 s at most); errors on a failed connection or a
// response that is not HTTP/1.x.
absl::StatusOr<HttpResponse> HttpExchange(int port, const std::string& request);

// GETs http://127.0.0.1:<port><path>, whatever the status; errors on a
// failed connection or a malformed response.
absl::StatusOr<HttpResponse> HttpFetch(int port, const std::string& path);

// GETs http://127.0.0.1:<port><path> and returns the body; errors on a
// failed connection or a non-200 status.
absl::StatusOr<std::string> HttpGet(int port, const std::string& path);

// A TCP connection to 127.0.0.1:<port> whose reads wait at most 5 s; -1 if
// it cannot be made. The caller closes it.
int ConnectLoopback(int port);

// A connection to 127.0.0.1:<port> that has sent part of a request and
// never finishes it (-1 if none could be made): the caller closes it.
int HoldUnfinishedHttpRequest(int port);

// Requests a browser, a scanner and Prometheus send to an HTTP port, by
// name: a favicon and a page with a browser's headers, POST/PUT/OPTIONS/
// TRACE, a traversal, an absolute-form target, HTTP/0.9, HTTP/2's preface,
// a TLS ClientHello, control bytes, a 64 KiB header, 200 header lines, bare
// newlines, and a Prometheus scrape. Every one must get a status code
// (the TLS hello: 400) and leave the server serving.
std::vector<std::pair<std::string, std::string>> HostileHttpRequests();

}  // namespace shardline

#endif  // SHARDLINE_TESTS_UTIL_HTTP_H_
