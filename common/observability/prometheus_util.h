// One-line builders for unlabelled Prometheus metrics on a registry.
#ifndef SHARDLINE_COMMON_OBSERVABILITY_PROMETHEUS_UTIL_H_
#define SHARDLINE_COMMON_OBSERVABILITY_PROMETHEUS_UTIL_H_

#include <string>

#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"

namespace shardline {

inline prometheus::Gauge& NewGauge(prometheus::Registry& r, const std::string& name, const std::string& help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(r).Add({});
}

inline prometheus::Counter& NewCounter(prometheus::Registry& r, const std::string& name, const std::string& help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(r).Add({});
}

}  // namespace shardline

#endif  // SHARDLINE_COMMON_OBSERVABILITY_PROMETHEUS_UTIL_H_
