// A minimal HTTP/1.0 GET for tests that scrape /metrics.
#ifndef SHARDLINE_TESTS_UTIL_HTTP_H_
#define SHARDLINE_TESTS_UTIL_HTTP_H_

#include <string>

#include "absl/status/statusor.h"

namespace shardline {

struct HttpResponse {
  int code = 0;
  std::string body;
};
// GETs http://127.0.0.1:<port><path>, whatever the status; errors on a
// failed connection or a malformed response.
absl::StatusOr<HttpResponse> HttpFetch(int port, const std::string& path);

// GETs http://127.0.0.1:<port><path> and returns the body; errors on a
// failed connection or a non-200 status.
absl::StatusOr<std::string> HttpGet(int port, const std::string& path);

}  // namespace shardline

#endif  // SHARDLINE_TESTS_UTIL_HTTP_H_
