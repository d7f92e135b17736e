// Gradient buckets: the flat buffer of a layout cut along layer boundaries
// into buckets of about `cap` floats, as PyTorch DDP's bucket_cap_mb. Each
// rank owns 1/N of every bucket (common/job/shard.h: OwnedPieces), and each
// bucket is reduce-scattered and all-gathered as one collective, so a
// bucket can go over the network as soon as backward has produced it.
#ifndef SHARDLINE_WORKER_MODEL_BUCKET_PLAN_H_
#define SHARDLINE_WORKER_MODEL_BUCKET_PLAN_H_

#include <cstdint>
#include <vector>

#include "common/job/shard.h"
#include "worker/model/flat_layout.h"

namespace shardline {

// A layer is the run of tensors sharing the name before the first '/'
// ("dense1/w", "dense1/b"). Layers are packed into buckets from the last
// (backward produces it first) to the first: a bucket takes the next layer
// while it stays within `cap_floats`, and a layer larger than the cap is a
// bucket of its own. cap_floats <= 0 or >= the total: one bucket. Returns
// ranges tiling [0, total) in ascending order (none for an empty layout).
std::vector<Range> BucketPlan(const FlatLayout& layout, int64_t cap_floats);

// cap in MiB (config collective.bucket_cap_mb) as a count of floats.
int64_t BucketCapFloats(double cap_mb);

}  // namespace shardline

#endif  // SHARDLINE_WORKER_MODEL_BUCKET_PLAN_H_
