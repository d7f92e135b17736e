#include "common/net/http_request.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace shardline {
namespace {

// RFC 9110 tchar: the characters of a method or a header name.
bool IsTokenChar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  switch (c) {
    case '!': case '#': case '$': case '%': case '&': case '\'': case '*': case '+':
    case '-': case '.': case '^': case '_': case '`': case '|': case '~':
      return true;
    default:
      return false;
  }
}

bool IsToken(absl::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!IsTokenChar(c)) return false;
  }
  return true;
}

// A target byte: visible ASCII; no space, control or 8-bit byte.
bool IsTargetChar(char c) { return c > 0x20 && c < 0x7f; }

// A header value byte: visible ASCII, space, tab, or obs-text (0x80-0xff).
bool IsFieldValueChar(char c) {
  const unsigned char u = static_cast<unsigned char>(c);
  return u == '\t' || (u >= 0x20 && u != 0x7f);
}

const char* ReasonPhrase(int code) {
  switch (code) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Status";
  }
}

HttpReply TextReply(int code, std::string body) {
  HttpReply r;
  r.code = code;
  r.body = std::move(body);
  return r;
}

}  // namespace

size_t HttpHeadEnd(absl::string_view buf) {
  const size_t crlf = buf.find("\r\n\r\n");
  const size_t lf = buf.find("\n\n");
  size_t end = 0;
  if (crlf != absl::string_view::npos) end = crlf + 4;
  if (lf != absl::string_view::npos && (end == 0 || lf + 2 < end)) end = lf + 2;
  return end;
}

bool HttpHeadCannotBeARequest(absl::string_view partial) {
  for (char c : partial) {
    if (c == '\n') return false;
    const unsigned char u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\r') || u >= 0x7f) return true;
  }
  return false;
}

absl::StatusOr<HttpRequest> ParseHttpRequest(absl::string_view head) {
  if (head.size() > kMaxHttpHeadBytes) return absl::InvalidArgumentError("request head too long");
  std::vector<absl::string_view> lines = absl::StrSplit(head, '\n');
  // The head ends in a blank line: drop it and what follows the split.
  while (!lines.empty() && (lines.back().empty() || lines.back() == "\r")) lines.pop_back();
  if (lines.empty()) return absl::InvalidArgumentError("empty request");
  for (absl::string_view& line : lines) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  }
  if (static_cast<int>(lines.size()) - 1 > kMaxHttpHeaderLines) {
    return absl::InvalidArgumentError("too many header lines");
  }

  std::vector<absl::string_view> parts = absl::StrSplit(lines[0], ' ');
  if (parts.size() != 3) return absl::InvalidArgumentError("request line is not METHOD TARGET VERSION");
  const absl::string_view method = parts[0], target = parts[1], version = parts[2];
  if (!IsToken(method) || method.size() > 32) return absl::InvalidArgumentError("bad method");
  if (target.empty()) return absl::InvalidArgumentError("empty target");
  for (char c : target) {
    if (!IsTargetChar(c)) return absl::InvalidArgumentError("control or space in the target");
  }
  if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || version[6] != '.' || version[5] < '0' ||
      version[5] > '9' || version[7] < '0' || version[7] > '9') {
    return absl::InvalidArgumentError("bad HTTP version");
  }
  if (version[5] != '1') return absl::UnimplementedError("only HTTP/1.x is served");

  for (size_t i = 1; i < lines.size(); ++i) {
    const absl::string_view line = lines[i];
    if (line.empty()) return absl::InvalidArgumentError("blank line inside the head");
    if (line[0] == ' ' || line[0] == '\t') return absl::InvalidArgumentError("folded header line");
    const size_t colon = line.find(':');
    if (colon == absl::string_view::npos || !IsToken(line.substr(0, colon))) {
      return absl::InvalidArgumentError(absl::StrCat("malformed header line ", i));
    }
    for (char c : line.substr(colon + 1)) {
      if (!IsFieldValueChar(c)) return absl::InvalidArgumentError(absl::StrCat("control byte in header line ", i));
    }
  }

  HttpRequest req;
  req.method = std::string(method);
  absl::string_view path = target;
  if (path == "*") {
    req.path = "*";
    return req;
  }
  // absolute-form (what proxies and some scanners send): keep the path.
  if (path.substr(0, 7) == "http://" || path.substr(0, 8) == "https://") {
    const size_t scheme_end = path.find("//") + 2;
    const size_t slash = path.find('/', scheme_end);
    path = slash == absl::string_view::npos ? absl::string_view("/") : path.substr(slash);
  }
  if (path[0] != '/') return absl::InvalidArgumentError("target is not a path");
  const size_t query = path.find_first_of("?#");
  if (query != absl::string_view::npos) path = path.substr(0, query);
  req.path = std::string(path);
  return req;
}

HttpReply AnswerHttpRequest(const HttpRoutes& routes, absl::string_view head) {
  absl::StatusOr<HttpRequest> req = ParseHttpRequest(head);
  if (!req.ok()) {
    const int code = req.status().code() == absl::StatusCode::kUnimplemented ? 505 : 400;
    return TextReply(code, absl::StrCat(req.status().message(), "\n"));
  }
  const auto route = routes.find(req->path);
  if (route == routes.end()) return TextReply(404, "not found\n");
  if (req->method != "GET" && req->method != "HEAD") {
    HttpReply r = TextReply(405, "only GET and HEAD are served\n");
    r.headers.emplace_back("Allow", "GET, HEAD");
    return r;
  }
  HttpReply reply = route->second(*req);
  reply.omit_body = req->head_only();
  return reply;
}

HttpReply HeadTooLargeReply() {
  return TextReply(431, absl::StrCat("request head longer than ", kMaxHttpHeadBytes, " bytes\n"));
}

std::string SerializeHttpReply(const HttpReply& reply) {
  std::string out = absl::StrCat("HTTP/1.1 ", reply.code, " ", ReasonPhrase(reply.code),
                                 "\r\nContent-Type: ", reply.content_type, "\r\nContent-Length: ", reply.body.size(),
                                 "\r\nCache-Control: no-store\r\nConnection: close\r\n");
  for (const auto& [name, value] : reply.headers) absl::StrAppend(&out, name, ": ", value, "\r\n");
  out += "\r\n";
  if (!reply.omit_body) out += reply.body;
  return out;
}

}  // namespace shardline
