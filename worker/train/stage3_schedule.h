// ZeRO stage 3's schedule: which buckets' parameters a pass holds whole
// and when a bucket's gradients are done, decided at each event of a
// step's passes. Pure decisions with no I/O, shared by the exchange that
// moves the buckets (exchange.h: gathers, gives back, reduce-scatters) and
// the memory plan that counts what it holds (memory_plan.h), so the two
// cannot drift apart (memory_plan_test: the plan's parameters term is what
// the exchange held, to the float).
//
//   PassCursor cursor;
//   const ParamWindow w = cursor.Announce(BucketsOf(buckets, layer), layer.begin, /*forward=*/true, options);
//   if (w.release_others) ... give back every bucket !w.Wanted(k) ...
//   ... gather [w.lo, w.hi], wait for them; start [w.first, w.last] ...
#ifndef SHARDLINE_WORKER_TRAIN_STAGE3_SCHEDULE_H_
#define SHARDLINE_WORKER_TRAIN_STAGE3_SCHEDULE_H_

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "common/job/shard.h"

namespace shardline {

struct ScheduleOptions {
  bool overlap = false;               // collectives on the background thread (collective.overlap)
  int prefetch = 1;                   // buckets gathered ahead, with overlap (collective.prefetch_buckets)
  bool reshard_after_forward = true;  // collective.reshard_after_forward
};

// What an announcement of a layer (LayerHooks::before_forward or
// before_backward) asks of the buckets.
struct ParamWindow {
  size_t lo = 0, hi = 0;         // the layer's buckets: whole before it is read
  int64_t first = 0, last = -1;  // then started ahead (overlap); may reach outside the buckets
  bool release_others = false;   // every bucket not wanted given back first
  bool in_order = false;         // beyond every layer the pass reached so far, in its direction
  bool past_first_layer = false;  // the pass announced an in-order layer before this one
  // The layer's buckets or those started ahead.
  bool Wanted(int64_t k) const {
    return (k >= static_cast<int64_t>(lo) && k <= static_cast<int64_t>(hi)) || (k >= first && k <= last);
  }
};

// A step's passes through the layers. A pass's first announcement gives
// nothing back and sets no frontier (the GPT's backward starts at its tied
// head, on the token embedding); a layer announced behind the frontier (a
// tied layer read again) is gathered without giving anything back; every
// layer in order moves the frontier and, in the backward (and in the
// forward with reshard_after_forward), gives back what the pass has left.
class PassCursor {
 public:
  // The decision for `layer` (first element `layer_begin`, lying in
  // buckets [buckets.first, buckets.second]) announced in the forward or
  // the backward.
  ParamWindow Announce(std::pair<size_t, size_t> buckets, int64_t layer_begin, bool forward,
                       const ScheduleOptions& options);
  // The pass is over (a step begins, or a forward no backward follows
  // ended): the next announcement starts a new one.
  void EndPass();

 private:
  int last_pass_ = 0;  // 0 none, 1 forward, -1 backward
  bool has_frontier_ = false;
  int64_t frontier_ = 0;
};

// Reduce-scatters a step keeps under way at once at stage 3; beyond that,
// the oldest is waited for and its gradients given back: 1 + prefetch with
// overlap; without, each runs when its bucket completes (none kept).
size_t ReducesInFlight(const ScheduleOptions& options);

// Per bucket, the gradient elements the backward has not finished in the
// step (LayerHooks::after_backward).
class BucketCompletion {
 public:
  explicit BucketCompletion(const std::vector<Range>& buckets);
  // A new step: nothing finished.
  void Reset();
  // `part` is final: the buckets it completes now, descending (a bucket
  // completes once, when its last element is finished).
  std::vector<size_t> Finish(Range part);
  bool complete(size_t k) const { return unfinished_[k] == 0; }

 private:
  const std::vector<Range> buckets_;
  std::vector<int64_t> unfinished_;
};

}  // namespace shardline

#endif  // SHARDLINE_WORKER_TRAIN_STAGE3_SCHEDULE_H_
