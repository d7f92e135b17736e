// shardline_rpc_rejected_total{reason}: calls refused by RpcAuth, on the
// process's registry. The coordinator and the worker both export it.
//
//   RpcAuth auth(env, token, RejectedRpcCounter(*registry));
#ifndef SHARDLINE_COMMON_NET_RPC_AUTH_METRICS_H_
#define SHARDLINE_COMMON_NET_RPC_AUTH_METRICS_H_

#include <functional>
#include <map>
#include <string>

#include "common/net/rpc_auth.h"
#include "prometheus/counter.h"
#include "prometheus/registry.h"

namespace shardline {

// The counter family is built (every reason at 0, so dashboards see the
// series before the first refusal) when this is called; the returned
// function increments it and may be called from any thread.
inline std::function<void(RejectReason)> RejectedRpcCounter(prometheus::Registry& registry) {
  auto& family = prometheus::BuildCounter()
                     .Name("shardline_rpc_rejected_total")
                     .Help("RPCs refused: without a proof of the job's token, with a stale or used one, a "
                           "reader's on a call that changes something, speaking for a rank they do not hold, or "
                           "past a credential's rate limit")
                     .Register(registry);
  std::map<RejectReason, prometheus::Counter*> counters;
  for (RejectReason r : kRejectReasons) {
    counters[r] = &family.Add({{"reason", RejectReasonLabel(r)}});
  }
  return [counters](RejectReason r) { counters.at(r)->Increment(); };
}

// shardline_connections_refused_total{reason}: connections a server's
// gate (common/net/connection_gate.h) closed unserved: "per_address",
// "total", "silent" (sent nothing in time), "descriptors" (accept found the
// process out of descriptors). Built (every reason at 0) when called.
inline std::function<void(const char*)> RefusedConnectionCounter(prometheus::Registry& registry) {
  auto& family = prometheus::BuildCounter()
                     .Name("shardline_connections_refused_total")
                     .Help("TCP connections closed unserved by the server's gate: over the bound per peer address "
                           "or in all, silent past the first-bytes deadline, or met without a free descriptor")
                     .Register(registry);
  std::map<std::string, prometheus::Counter*> counters;
  for (const char* r : {"per_address", "total", "silent", "descriptors"}) counters[r] = &family.Add({{"reason", r}});
  return [counters](const char* reason) {
    if (const auto it = counters.find(reason); it != counters.end()) it->second->Increment();
  };
}

}  // namespace shardline

#endif  // SHARDLINE_COMMON_NET_RPC_AUTH_METRICS_H_
