#include "worker/collective/transport.h"

namespace shardline {

absl::Status RecvInto(Transport& transport, int peer, uint64_t tag, absl::Span<char> out,
                      absl::Time deadline) {
  absl::StatusOr<std::unique_ptr<Payload>> p = transport.Receive(peer, tag, deadline);
  if (!p.ok()) return p.status();
  return CopyPayloadInto(**p, out);
}

}  // namespace shardline
