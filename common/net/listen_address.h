// The host part of a "HOST:PORT" listen address, as the servers, workers and
// tools of shardline read it.
#ifndef SHARDLINE_COMMON_NET_LISTEN_ADDRESS_H_
#define SHARDLINE_COMMON_NET_LISTEN_ADDRESS_H_

#include <string>

#include "absl/strings/string_view.h"

namespace shardline {

// What comes before the last ':' of `listen` ("10.0.0.5:7000" -> "10.0.0.5",
// "[::1]:7000" -> "[::1]"); all of `listen` when it has no ':'.
std::string ListenHost(absl::string_view listen);

// True for a host that means every interface: "", "0.0.0.0", "::", "[::]".
// Peers cannot be told such a host; a process advertises another one.
bool IsWildcardHost(absl::string_view host);

}  // namespace shardline

#endif  // SHARDLINE_COMMON_NET_LISTEN_ADDRESS_H_
