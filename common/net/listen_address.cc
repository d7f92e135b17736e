#include "common/net/listen_address.h"

namespace shardline {

std::string ListenHost(absl::string_view listen) {
  const size_t colon = listen.rfind(':');
  return std::string(colon == absl::string_view::npos ? listen : listen.substr(0, colon));
}

bool IsWildcardHost(absl::string_view host) {
  return host.empty() || host == "0.0.0.0" || host == "::" || host == "[::]";
}

}  // namespace shardline
