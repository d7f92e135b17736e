#include "common/net/stable_port.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>


#include "absl/random/random.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/platform/env.h"
#include "absl/strings/str_split.h"
#include "absl/strings/numbers.h"

namespace shardline {
namespace {

// True when nothing on `addr` holds `port` (listening or bound).
bool Free(in_addr addr, int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  // As the server will: a connection of an earlier owner in TIME_WAIT does
  // not make the port busy.
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in sa = {};
  sa.sin_family = AF_INET;
  sa.sin_addr = addr;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = bind(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof(sa)) == 0;
  close(fd);
  return ok;
}

}  // namespace

absl::StatusOr<int> PickStablePort(Env* env, const std::string& host, const StablePortOptions& options) {
  in_addr addr;
  if (inet_pton(AF_INET, host.c_str(), &addr) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("'", host, "' is not an IPv4 address"));
  }
  // Linux's default when the file cannot be read.
  int low = 32768, high = 60999;
  if (absl::StatusOr<std::string> range = env->ReadFile(options.port_range_file, kMaxSmallFileBytes); range.ok()) {
    std::vector<absl::string_view> two = absl::StrSplit(*range, absl::ByAnyChar(" \t\n"), absl::SkipEmpty());
    int l = 0, h = 0;
    if (two.size() == 2 && absl::SimpleAtoi(two[0], &l) && absl::SimpleAtoi(two[1], &h)) {
      low = l;
      high = h;
    }
  }
  int from = options.floor, to = low - 1;
  if (to < from) {
    from = high + 1;
    to = 65535;
  }
  if (to < from) {
    return absl::NotFoundError(absl::StrCat("the ephemeral port range ", low, "-", high, " (", options.port_range_file,
                                            ") leaves no room for a stable port"));
  }
  absl::BitGen gen;
  for (int i = 0; i < options.attempts; ++i) {
    const int port = absl::Uniform<int>(absl::IntervalClosed, gen, from, to);
    if (Free(addr, port)) return port;
  }
  return absl::NotFoundError(absl::StrCat("no free port among ", options.attempts, " tried in ", from, "-", to,
                                          " on ", host));
}

}  // namespace shardline
