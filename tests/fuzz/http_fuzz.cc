// The metrics endpoint's request path: any bytes a client sends, as the
// server sees them arrive, get one well-formed reply (common/net/http_request.h).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/strings/string_view.h"
#include "common/net/http_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  shardline::HttpRoutes routes;
  routes["/metrics"] = [](const shardline::HttpRequest& req) {
    shardline::HttpReply r;
    r.body = req.path;
    return r;
  };
  // As the server does: answer once the head is whole, or hopeless, or too long.
  const size_t end = shardline::HttpHeadEnd(bytes);
  const bool hopeless = end == 0 && shardline::HttpHeadCannotBeARequest(bytes);
  shardline::HttpReply reply;
  if (end != 0 && end <= shardline::kMaxHttpHeadBytes) {
    reply = shardline::AnswerHttpRequest(routes, absl::string_view(bytes).substr(0, end));
  } else if (hopeless) {
    reply = shardline::AnswerHttpRequest(routes, bytes);
  } else {
    reply = shardline::HeadTooLargeReply();
  }
  if (reply.code < 200 || reply.code > 599) abort();
  const std::string out = shardline::SerializeHttpReply(reply);
  if (out.compare(0, 9, "HTTP/1.1 ") != 0 || out.find("\r\n\r\n") == std::string::npos) abort();
  // A reply never carries a raw control byte from the request into its head.
  const std::string head = out.substr(0, out.find("\r\n\r\n"));
  for (char c : head) {
    if ((static_cast<unsigned char>(c) < 0x20 && c != '\r' && c != '\n') || c == 0x7f) abort();
  }
  return 0;
}
