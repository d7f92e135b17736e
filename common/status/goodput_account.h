// The goodput account (coordinator::Goodput, kept by GoodputLedger) read
// back: its kinds, its ratio and its one-line summary. Pure functions, shared
// by the coordinator and `shardline status`.
#ifndef SHARDLINE_COMMON_STATUS_GOODPUT_ACCOUNT_H_
#define SHARDLINE_COMMON_STATUS_GOODPUT_ACCOUNT_H_

#include <string>
#include <vector>

#include "proto/coordinator.pb.h"

namespace shardline {

// The badput kinds, as the metric's `kind` label spells them.
const std::vector<const char*>& BadputKinds();

// goodput / (goodput + every badput); 0 before any time is accounted.
double GoodputRatio(const coordinator::Goodput& g);

// "goodput 93.1% (412.3 s of first-time training); lost: startup 3.2 s,
// recovery 1.0 s; 1 disruption": kinds with no time are left out.
std::string GoodputLine(const coordinator::Goodput& g);

}  // namespace shardline

#endif  // SHARDLINE_COMMON_STATUS_GOODPUT_ACCOUNT_H_
