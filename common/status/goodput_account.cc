#include "common/status/goodput_account.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace shardline {

const std::vector<const char*>& BadputKinds() {
  static const auto* kinds = new std::vector<const char*>{
      "startup", "data_loading", "checkpoint_save", "checkpoint_restore", "wasted_progress", "recovery", "evaluation"};
  return *kinds;
}

double GoodputRatio(const coordinator::Goodput& g) {
  double total = g.goodput_seconds();
  for (const auto& [kind, seconds] : g.badput_seconds()) total += seconds;
  return total > 0 ? g.goodput_seconds() / total : 0;
}

std::string GoodputLine(const coordinator::Goodput& g) {
  std::string lost;
  for (const char* kind : BadputKinds()) {
    auto it = g.badput_seconds().find(kind);
    if (it == g.badput_seconds().end() || it->second < 0.05) continue;
    absl::StrAppend(&lost, lost.empty() ? "" : ", ", kind, " ", absl::StrFormat("%.1f", it->second), " s");
  }
  return absl::StrFormat("goodput %.1f%% (%.1f s of first-time training); lost: %s; %d disruption%s",
                         100 * GoodputRatio(g), g.goodput_seconds(), lost.empty() ? "nothing" : lost,
                         g.disruptions(), g.disruptions() == 1 ? "" : "s");
}

}  // namespace shardline
