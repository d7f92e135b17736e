// HTTP/1.x requests as the metrics endpoint reads them, and the one decision
// it makes about each: which reply. Pure functions of bytes, no sockets, so
// that every request a browser, a scanner or a fuzzer can send is answered
// with a status code (tests/fuzz/http_fuzz.cc).
//
//   size_t end = HttpHeadEnd(received);            // 0 until the head is whole
//   HttpReply reply = AnswerHttpRequest(routes, received.substr(0, end));
//   std::string bytes = SerializeHttpReply(reply);
//
// Only what serving read-only pages needs is read: the request line. Header
// lines are checked for shape and otherwise ignored; a request body is never
// read (every reply closes the connection).
#ifndef SHARDLINE_COMMON_NET_HTTP_REQUEST_H_
#define SHARDLINE_COMMON_NET_HTTP_REQUEST_H_

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace shardline {

// A request head may be at most this long (request line and headers); a
// longer one is answered 431. Browsers send under 2 KiB.
inline constexpr size_t kMaxHttpHeadBytes = 16 * 1024;
// ... and have at most this many header lines.
inline constexpr int kMaxHttpHeaderLines = 100;

struct HttpRequest {
  std::string method;  // "GET", "HEAD", "POST", ...: a token, as sent
  std::string path;    // "/metrics": the target without its query; "*" for OPTIONS *
  bool head_only() const { return method == "HEAD"; }
};

struct HttpReply {
  int code = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  // Extra header lines, e.g. {"Allow", "GET, HEAD"}.
  std::vector<std::pair<std::string, std::string>> headers;
  // A HEAD request's reply: the same head, no body.
  bool omit_body = false;
};

// The index just past the blank line that ends the request head in `buf`
// ("\r\n\r\n", or "\n\n" from lenient clients), or 0 while it has not
// arrived.
size_t HttpHeadEnd(absl::string_view buf);

// True if `partial`, a head still arriving, can already not be a request:
// its first line has a byte no request line has (a TLS ClientHello, binary
// noise). The server answers it at once instead of waiting for a blank line.
bool HttpHeadCannotBeARequest(absl::string_view partial);

// Parses a whole request head (as HttpHeadEnd delimits it). Errors:
// INVALID_ARGUMENT for anything malformed (request line, target, a header
// line, a control byte), UNIMPLEMENTED for an HTTP version other than 1.x.
// The message never repeats the client's bytes.
absl::StatusOr<HttpRequest> ParseHttpRequest(absl::string_view head);

// Serves one GET (or HEAD) path. Runs on the server's thread: thread-safe
// and quick.
using HttpHandler = std::function<HttpReply(const HttpRequest&)>;
using HttpRoutes = std::map<std::string, HttpHandler>;

// The reply to `head`: 400 (malformed), 505 (not HTTP/1.x), 404 (no such
// path), 405 with Allow (a method other than GET or HEAD on a served
// path), or the handler's reply (its body dropped for HEAD).
HttpReply AnswerHttpRequest(const HttpRoutes& routes, absl::string_view head);

// The reply for a head that grew past kMaxHttpHeadBytes: 431.
HttpReply HeadTooLargeReply();

// Status line, Content-Type, Content-Length, Cache-Control: no-store,
// Connection: close, the extra headers, then the body (unless omitted).
std::string SerializeHttpReply(const HttpReply& reply);

}  // namespace shardline

#endif  // SHARDLINE_COMMON_NET_HTTP_REQUEST_H_
