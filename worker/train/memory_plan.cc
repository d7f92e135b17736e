#include "worker/train/memory_plan.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/job/islands.h"
#include "common/platform/status_macros.h"
#include "worker/data/pipeline.h"
#include "worker/model/model_factory.h"
#include "worker/train/stage3_schedule.h"
#include "worker/train/train_loop.h"

namespace shardline {
namespace {

// Issue 62: a run takes in-memory snapshots only at multiples of
// memory_every_steps before its last step (cadence.cc); a 60-step run with
// snapshots every 100 holds none, and was planned 43 MiB for them.
bool TakesMemorySnapshots(const config::JobConfig& config) {
  const int64_t every = config.checkpoint().memory_every_steps();
  return every > 0 && every < config.train().total_steps();
}

constexpr int64_t kFloat = sizeof(float);
constexpr int64_t kBfloat = 2;  // bytes of a bfloat16

double MiB(int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

// The most floats any rank owns.
int64_t MostOwned(const std::vector<Range>& buckets, int world) {
  int64_t most = 0;
  for (int r = 0; r < world; ++r) most = std::max(most, PiecesSize(OwnedPieces(buckets, r, world)));
  return most;
}

// Stage 3: the most floats beyond a rank's pieces whole at once
// (exchange.h), of the parameters alone and of the parameters and
// gradients together.
struct Windows {
  int64_t params = 0;
  int64_t both = 0;
};

// The windows of a step: the model's announcements (Layers and
// ReadAgainAfterLast in the forward, BackwardReads and GradientParts in the
// backward) run through the exchange's own decisions (stage3_schedule.h),
// counting what is whole after each. The forward: each announcement's
// window gathered, what the pass left given back. The backward: each
// layer read gathered likewise, then part by part (GradientParts, downwards)
// the gradients of the buckets a part lies in taken before it is written;
// a bucket whose parts are all final has its parameters given back and its
// reduce-scatter started, and beyond ReducesInFlight the oldest's gradients
// given back. A layer read again after the last (the GPT's tied token
// embedding) has its gradients written first and final last. Checked
// against the exchange's own count of what it held: memory_plan_test,
// TheStageThreeParameterTermIsWhatTheExchangeHeld.
Windows StageThreeWindows(const std::vector<Range>& buckets, const Model& model, int world,
                          const ScheduleOptions& options) {
  const size_t n = buckets.size();
  Windows w;
  if (n == 0) return w;
  std::vector<int64_t> beyond(n);
  for (size_t k = 0; k < n; ++k) beyond[k] = buckets[k].size() - ShardRange(buckets[k].size(), 0, world).size();
  std::vector<char> whole(n, 0), taken(n, 0);  // between steps every bucket is sharded
  auto measure = [&] {
    int64_t params = 0, both = 0;
    for (size_t k = 0; k < n; ++k) {
      params += whole[k] ? beyond[k] : 0;
      both += (whole[k] ? beyond[k] : 0) + (taken[k] ? beyond[k] : 0);
    }
    w.params = std::max(w.params, params);
    w.both = std::max(w.both, both);
  };
  PassCursor cursor;
  auto announce = [&](Range layer, bool forward) {
    const ParamWindow a = cursor.Announce(BucketsOf(buckets, layer), layer.begin, forward, options);
    for (size_t k = 0; k < n; ++k) {
      const int64_t i = static_cast<int64_t>(k);
      if (a.release_others && !a.Wanted(i)) whole[k] = 0;
      if (a.Wanted(i)) whole[k] = 1;
    }
    measure();
  };
  for (const Range& layer : model.Layers()) announce(layer, true);
  const std::vector<Range> reread = model.ReadAgainAfterLast();
  for (const Range& layer : reread) announce(layer, true);
  // The backward.
  BucketCompletion completion(buckets);
  std::vector<size_t> reducing;  // oldest first
  const std::vector<Range> parts = model.GradientParts();
  std::vector<char> begun(parts.size(), 0);
  auto is_reread = [&](Range part) {
    return std::any_of(reread.begin(), reread.end(), [&](Range r) { return !Overlap(r, part).empty(); });
  };
  auto begin = [&](size_t p) {
    const auto [lo, hi] = BucketsOf(buckets, parts[p]);
    for (size_t k = lo; k <= hi; ++k) taken[k] = 1;
    begun[p] = 1;
    measure();
  };
  auto finish = [&](size_t p) {
    for (const size_t k : completion.Finish(parts[p])) {
      whole[k] = 0;
      reducing.push_back(k);
    }
    while (reducing.size() > ReducesInFlight(options)) {
      taken[reducing.front()] = 0;
      reducing.erase(reducing.begin());
    }
  };
  for (const Range& layer : model.BackwardReads()) {
    announce(layer, false);
    for (size_t p = parts.size(); p-- > 0;) {
      if (begun[p] || Overlap(parts[p], layer).empty()) continue;
      begin(p);
      if (!is_reread(parts[p])) finish(p);
    }
  }
  for (size_t p = parts.size(); p-- > 0;) {  // the parts of layers the backward reads nothing of
    if (begun[p]) continue;
    begin(p);
    finish(p);
  }
  for (size_t p = parts.size(); p-- > 0;) {
    if (is_reread(parts[p])) finish(p);
  }
  return w;
}

// What a split holds in the process's own memory: token shards are mapped
// (the page cache's, shared by a host's workers, given back under
// pressure), so they count nothing here.
int64_t DataBytes(const Dataset& d) {
  return static_cast<int64_t>(d.pixels.size() + d.text.size() + d.labels.size() * sizeof(int32_t));
}

// The epoch permutation, when it is held (pipeline.h: kStored).
int64_t PermutationBytes(const Dataset& train) {
  return PermutationFor(train) == Permutation::kHashed ? 0 : train.num_examples * static_cast<int64_t>(sizeof(int32_t));
}

}  // namespace

bool PlanFits(int64_t total, int64_t limit_bytes, int margin_percent) {
  return static_cast<double>(total) <= (100 - margin_percent) / 100.0 * static_cast<double>(limit_bytes);
}

int64_t MemoryPlan::total() const {
  int64_t sum = 0;
  for (const MemoryTerm& t : terms) sum += t.bytes;
  return sum;
}

const MemoryTerm& MemoryPlan::largest() const {
  const MemoryTerm* best = &terms.front();
  for (const MemoryTerm& t : terms) {
    if (t.name != "fixed" && (best->name == "fixed" || t.bytes > best->bytes)) best = &t;
  }
  return *best;
}

MemoryPlan PlanMemory(const config::JobConfig& config, const Model& model, const std::vector<Range>& buckets,
                      const TrainingData& data, const IslandShape& islands) {
  MemoryPlan plan;
  const int world = islands.world;
  plan.world = world;
  const config::CollectiveConfig& coll = config.collective();
  plan.zero_stage = coll.zero_stage() == 3 ? 3 : 2;
  const int64_t p = model.layout().total_size();
  plan.parameters = p;
  // Islands: the state is sharded over the island, the batch over the world.
  const int sharded = islands.ShardWorld();
  const int64_t own = MostOwned(buckets, sharded);
  const bool stage3 = plan.zero_stage == 3;
  const bool overlap = coll.overlap() && sharded > 1 && buckets.size() > 1;
  const int prefetch = overlap ? coll.prefetch_buckets() : 0;
  const Windows windows =
      stage3 ? StageThreeWindows(buckets, model, sharded,
                                 ScheduleOptions{overlap, prefetch, coll.reshard_after_forward()})
             : Windows{};
  const int64_t whole = windows.params;
  const int accum = std::max(1, config.train().grad_accum_steps());
  plan.micro_batch = MicroBatchSize(config, world);
  const int64_t state_buffers = (config.optimizer().has_adamw() ? 2 : 1) + (islands.outer_steps ? 2 : 0);
  int64_t largest_bucket = 0;
  for (const Range& b : buckets) largest_bucket = std::max(largest_bucket, b.size());
  const int64_t shard_bytes = (1 + state_buffers) * own * kFloat;

  plan.terms.push_back({"fixed", kFixedBytes});
  plan.terms.push_back({"data", DataBytes(data.train) + DataBytes(data.test) + PermutationBytes(data.train)});
  // BF16: the weights' bfloat16 rounding, made once a step and kept
  // (KeepRoundedWeights, products.h): every parameter at stage 2 (a bound:
  // biases and norms are not rounded), the layers whole at once at stage
  // 3. The products' other scratch is the model's: "activations".
  const int64_t rounded = config.train().precision() == config::BF16 ? (stage3 ? whole : p) * kBfloat : 0;
  plan.terms.push_back({"parameters", (stage3 ? own + whole : p) * kFloat + rounded});
  // Stage 3: the gradients' share of the two windows' peak together.
  plan.terms.push_back({"gradients", (stage3 && accum == 1 ? own + (windows.both - windows.params) : p) * kFloat});
  plan.terms.push_back({"optimizer", state_buffers * own * kFloat});
  plan.terms.push_back({"activations", model.WorkspaceBytes(plan.micro_batch)});
  const int64_t chunk = sharded > 1 ? (largest_bucket + sharded - 1) / sharded : 0;
  // An outer step's pseudo-gradient (one island too), beside the step's own buffers (not at once).
  const int64_t outer = islands.outer_steps ? own * kFloat : 0;
  plan.terms.push_back({"communication", std::max(2 * chunk * kFloat * (overlap ? 2 : 1), outer)});
  int64_t snapshots = 0;
  if (TakesMemorySnapshots(config) && sharded > 1) {
    // Snapshots go round the ring that shards the state (the world, or an
    // island: an island of one worker takes none). Two steps of
    // memory_copies shards held (memory_snapshots.h keeps two), and while a
    // third is taken: its own shard, the one passed on, the one received
    // and gRPC's copy of it.
    snapshots += (2 * config.checkpoint().memory_copies() + 4) * shard_bytes;
  }
  const config::CheckpointConfig& ckpt = config.checkpoint();
  const bool saves = ckpt.every_steps() > 0 || ckpt.every_seconds() > 0 || ckpt.save_final() || !ckpt.best_metric().empty();
  // An async save's copy of the shard (a synchronous one writes from the
  // live state: save_restore.h, ViewShard).
  if (saves && ckpt.async()) snapshots += shard_bytes;
  plan.terms.push_back({"snapshots", snapshots});
  return plan;
}

absl::StatusOr<MemoryPlan> PlanJob(const config::JobConfig& config, const TrainingData& data, int world) {
  ASSIGN_OR_RETURN(std::unique_ptr<Model> model,
                   CreateModel(config.model(), InputOf(data.train), ModelOptionsOf(config.train())));
  return PlanMemory(config, *model, GradientBuckets(config, model->layout()), data, ShapeIslands(config, world));
}

std::string DescribePlan(const MemoryPlan& plan) {
  std::vector<std::string> parts;
  for (const MemoryTerm& t : plan.terms) parts.push_back(absl::StrFormat("%s %.1f MiB", t.name, MiB(t.bytes)));
  return absl::StrCat(absl::StrJoin(parts, ", "), absl::StrFormat("; total %.1f MiB", MiB(plan.total())));
}

std::string PlanTable(const MemoryPlan& plan) {
  std::string out = absl::StrFormat("per worker, %d workers, ZeRO stage %d, %d examples per micro-batch, %d parameters\n",
                                    plan.world, plan.zero_stage, plan.micro_batch, plan.parameters);
  for (const MemoryTerm& t : plan.terms) absl::StrAppendFormat(&out, "  %-14s %10.1f MiB\n", t.name, MiB(t.bytes));
  absl::StrAppendFormat(&out, "  %-14s %10.1f MiB\n", "total", MiB(plan.total()));
  return out;
}

absl::Status CheckPlanFits(const MemoryPlan& plan, const config::JobConfig& config, const TrainingData& data,
                           int64_t limit_bytes, const std::string& limit_source) {
  const int world = plan.world;
  const int margin = config.runtime().memory_margin_percent();
  if (limit_bytes <= 0 || PlanFits(plan.total(), limit_bytes, margin)) return absl::OkStatus();
  // What would fit: each change alone, as the plan says.
  std::vector<std::string> fits;
  auto try_change = [&](const std::string& what, config::JobConfig changed, int w) {
    absl::StatusOr<MemoryPlan> alt = PlanJob(changed, data, w);
    if (alt.ok() && PlanFits(alt->total(), limit_bytes, margin)) {
      fits.push_back(absl::StrFormat("%s (%.1f MiB)", what, MiB(alt->total())));
    }
  };
  if (config.collective().zero_stage() != 3) {
    config::JobConfig c = config;
    c.mutable_collective()->set_zero_stage(3);
    try_change("collective.zero_stage=3", c, world);
  }
  if (!config.train().remat() && (config.model().has_gpt() || config.model().has_vit())) {
    config::JobConfig c = config;
    c.mutable_train()->set_remat(true);
    try_change("train.remat=true", c, world);
  }
  if (TakesMemorySnapshots(config) && world > 1) {
    config::JobConfig c = config;
    c.mutable_checkpoint()->set_memory_every_steps(0);
    try_change("checkpoint.memory_every_steps=0 (no in-memory snapshots)", c, world);
  }
  if (config.checkpoint().async()) {
    config::JobConfig c = config;
    c.mutable_checkpoint()->set_async(false);
    try_change("checkpoint.async=false (saves written from the live state, without a copy)", c, world);
  }
  for (int w = world + 1; w <= std::max(world * 4, world + 1); ++w) {
    const size_t before = fits.size();
    try_change(absl::StrCat(w, " workers"), config, w);
    if (fits.size() > before) break;
  }
  if (config.train().grad_accum_steps() * 2 <= config.data().global_batch_size()) {
    config::JobConfig c = config;
    c.mutable_train()->set_grad_accum_steps(config.train().grad_accum_steps() * 2);
    try_change(absl::StrCat("train.grad_accum_steps=", c.train().grad_accum_steps(), " (a smaller micro-batch)"), c, world);
  }
  const MemoryTerm& big = plan.largest();
  return absl::FailedPreconditionError(absl::StrFormat(
      "this job needs about %.1f MiB per worker, more than %d%% of the %.1f MiB limit of %s (the rest is the "
      "plan's margin, runtime.memory_margin_percent); the largest term is %s, %.1f MiB (shardline plan --config F "
      "--workers %d lists them all); %s",
      MiB(plan.total()), 100 - margin, MiB(limit_bytes), limit_source, big.name, MiB(big.bytes), world,
      fits.empty() ? std::string("no single change of stage, remat, snapshots, saves, workers or micro-batch fits it")
                   : absl::StrCat("it would fit with ", absl::StrJoin(fits, ", or ", [](std::string* out, const std::string& f) {
                                    out->append(f);
                                  }))));
}

}  // namespace shardline
