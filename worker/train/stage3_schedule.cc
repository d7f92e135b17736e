#include "worker/train/stage3_schedule.h"

namespace shardline {

ParamWindow PassCursor::Announce(std::pair<size_t, size_t> buckets, int64_t layer_begin, bool forward,
                                 const ScheduleOptions& options) {
  ParamWindow w;
  w.lo = buckets.first;
  w.hi = buckets.second;
  const int pass = forward ? 1 : -1;
  const bool first_of_pass = last_pass_ != pass;
  w.past_first_layer = !first_of_pass && has_frontier_;
  if (first_of_pass) {
    last_pass_ = pass;
    has_frontier_ = false;
  }
  w.in_order = !first_of_pass &&
               (!has_frontier_ || (forward ? layer_begin > frontier_ : layer_begin < frontier_));
  if (w.in_order) {
    frontier_ = layer_begin;
    has_frontier_ = true;
  }
  const int64_t ahead = options.overlap && (w.in_order || first_of_pass) ? options.prefetch : 0;
  // The next buckets in the pass's order.
  w.first = forward ? static_cast<int64_t>(w.hi) + 1 : static_cast<int64_t>(w.lo) - ahead;
  w.last = forward ? static_cast<int64_t>(w.hi) + ahead : static_cast<int64_t>(w.lo) - 1;
  w.release_others = w.in_order && (!forward || options.reshard_after_forward);
  return w;
}

void PassCursor::EndPass() {
  last_pass_ = 0;
  has_frontier_ = false;
}

size_t ReducesInFlight(const ScheduleOptions& options) {
  return options.overlap ? static_cast<size_t>(1 + options.prefetch) : 0;
}

BucketCompletion::BucketCompletion(const std::vector<Range>& buckets) : buckets_(buckets) { Reset(); }

void BucketCompletion::Reset() {
  unfinished_.clear();
  for (const Range& b : buckets_) unfinished_.push_back(b.size());
}

std::vector<size_t> BucketCompletion::Finish(Range part) {
  std::vector<size_t> done;
  for (size_t k = buckets_.size(); k-- > 0;) {
    const Range both = Overlap(buckets_[k], part);
    if (both.empty() || unfinished_[k] == 0) continue;
    unfinished_[k] -= both.size();
    if (unfinished_[k] == 0) done.push_back(k);
  }
  return done;
}

}  // namespace shardline
