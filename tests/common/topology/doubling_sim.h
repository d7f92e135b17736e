// Test helper: runs RecursiveDoublingSchedule for every rank of a world as a
// message-passing simulation (no transport), so the schedule can be checked
// on its own and give reference results for the transports' tests.
#ifndef SHARDLINE_TESTS_WORKER_COLLECTIVE_DOUBLING_SIM_H_
#define SHARDLINE_TESTS_WORKER_COLLECTIVE_DOUBLING_SIM_H_

#include <functional>
#include <map>
#include <tuple>
#include <vector>

#include "common/topology/doubling_schedule.h"

namespace shardline {

// Each rank starts with inputs[r]; combine(lower, upper) merges two partials.
// Returns every rank's final values, or an empty vector if the schedule
// deadlocks or leaves a message unreceived.
template <typename V>
std::vector<V> SimulateDoubling(const std::vector<V>& inputs, const std::function<V(const V&, const V&)>& combine) {
  const int n = static_cast<int>(inputs.size());
  std::vector<std::vector<DoublingStep>> steps(n);
  for (int r = 0; r < n; ++r) steps[r] = RecursiveDoublingSchedule(r, n);
  std::vector<V> values = inputs;
  std::vector<size_t> next(n, 0);
  std::vector<bool> sent(n, false);                // the current step's send is done
  std::map<std::tuple<int, int, int>, V> inflight;  // (from, to, round) -> partial
  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < n; ++r) {
      if (next[r] == steps[r].size()) continue;
      const DoublingStep& s = steps[r][next[r]];
      const bool sends = s.kind == DoublingStep::kSendValues || s.kind == DoublingStep::kSendResult ||
                         s.kind == DoublingStep::kExchange;
      if (sends && !sent[r]) {
        if (!inflight.emplace(std::make_tuple(r, s.peer, s.round), values[r]).second) return {};
        sent[r] = true;
        progress = true;
      }
      if (s.kind == DoublingStep::kSendValues || s.kind == DoublingStep::kSendResult) {
        sent[r] = false;
        ++next[r];
        continue;
      }
      auto it = inflight.find(std::make_tuple(s.peer, r, s.round));
      if (it == inflight.end()) continue;
      const V theirs = it->second;
      inflight.erase(it);
      if (s.kind == DoublingStep::kReceiveResult) {
        values[r] = theirs;
      } else if (s.kind == DoublingStep::kFoldExtra || s.mine_first) {
        values[r] = combine(values[r], theirs);
      } else {
        values[r] = combine(theirs, values[r]);
      }
      sent[r] = false;
      ++next[r];
      progress = true;
    }
  }
  for (int r = 0; r < n; ++r) {
    if (next[r] != steps[r].size()) return {};
  }
  if (!inflight.empty()) return {};
  return values;
}

}  // namespace shardline

#endif  // SHARDLINE_TESTS_WORKER_COLLECTIVE_DOUBLING_SIM_H_
