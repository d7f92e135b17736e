// shardline_rpc_rejected_total{reason}: calls refused by RpcAuth, on the
// process's registry. The coordinator and the worker both export it.
//
//   RpcAuth auth(env, token, RejectedRpcCounter(*registry));
#ifndef SHARDLINE_COMMON_NET_RPC_AUTH_METRICS_H_
#define SHARDLINE_COMMON_NET_RPC_AUTH_METRICS_H_

#include <functional>
#include <map>

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

}  // namespace shardline

#endif  // SHARDLINE_COMMON_NET_RPC_AUTH_METRICS_H_
