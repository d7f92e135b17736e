// shardline_rpc_rejected_total{reason}: calls refused by RpcAuth, on the
// process's registry. The coordinator and the worker both export it.
//
//   RpcAuth auth(token, RejectedRpcCounter(*registry));
#ifndef SHARDLINE_COMMON_RPC_AUTH_METRICS_H_
#define SHARDLINE_COMMON_RPC_AUTH_METRICS_H_

#include <functional>

#include "common/rpc_auth.h"
#include "prometheus/counter.h"
#include "prometheus/registry.h"

namespace shardline {

// The counter family is built (with both reasons at 0, so dashboards see
// the series before the first refusal) when this is called; the returned
// function increments it and may be called from any thread.
inline std::function<void(RejectReason)> RejectedRpcCounter(prometheus::Registry& registry) {
  auto& family = prometheus::BuildCounter()
                     .Name("shardline_rpc_rejected_total")
                     .Help("RPCs refused: without the job's token, or speaking for a rank they do not hold")
                     .Register(registry);
  prometheus::Counter* missing = &family.Add({{"reason", RejectReasonLabel(RejectReason::kMissingToken)}});
  prometheus::Counter* wrong = &family.Add({{"reason", RejectReasonLabel(RejectReason::kWrongToken)}});
  prometheus::Counter* stranger = &family.Add({{"reason", RejectReasonLabel(RejectReason::kNotAMember)}});
  return [missing, wrong, stranger](RejectReason r) {
    (r == RejectReason::kMissingToken ? missing : r == RejectReason::kWrongToken ? wrong : stranger)->Increment();
  };
}

}  // namespace shardline

#endif  // SHARDLINE_COMMON_RPC_AUTH_METRICS_H_
