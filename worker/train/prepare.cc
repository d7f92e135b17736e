#include "worker/train/prepare.h"

#include <limits>

#include "absl/strings/str_format.h"
#include "absl/strings/str_cat.h"
#include "common/platform/clock.h"
#include "common/platform/logging.h"
#include "common/platform/memory_limit.h"
#include "common/platform/status_macros.h"
#include "worker/checkpoint/restore_state.h"
#include "worker/model/model_factory.h"
#include "worker/train/numerics.h"

namespace shardline {
namespace {

// The tighter of runtime.memory_limit_mb and this process's memory cgroup:
// a job whose plan exceeds it is refused (memory_plan.h: CheckPlanFits).
absl::Status CheckMemoryLimit(const MemoryPlan& plan, const config::JobConfig& config, const TrainingData& data,
                              const Collectives& comm, Env* env) {
  int64_t limit = config.runtime().memory_limit_mb() << 20;
  std::string source = absl::StrCat("runtime.memory_limit_mb (", config.runtime().memory_limit_mb(), ")");
  const MemoryBound bound = ReadMemoryBound(env);
  if (bound.cgroup_limit > 0 && (limit <= 0 || bound.cgroup_limit < limit)) {
    limit = bound.cgroup_limit;
    source = absl::StrCat("rank ", comm.rank(), "'s memory cgroup (", bound.cgroup, ")");
  }
  if (limit <= 0) return absl::OkStatus();
  return CheckPlanFits(plan, config, data, limit, source);
}

// The generation's island shape: the rings' when there are rings (comm is
// then the island's ring), else the config's over comm's world, which must
// then take no outer steps.
absl::StatusOr<IslandShape> IslandsOf(const config::JobConfig& config, const Collectives& comm,
                                      const TrainOptions& options) {
  if (options.island_rings != nullptr) return options.island_rings->shape;
  IslandShape shape = ShapeIslands(config, comm.world_size());
  if (shape.outer_steps) {
    return absl::InvalidArgumentError(
        "collective.islands / collective.diloco: the job takes outer steps, but this run was given no island rings");
  }
  return shape;
}

// A restore of shards another fingerprint computed (other kernels: a RELAXED
// job, or a checkpoint carried to another cluster) is said in the log: from
// here the bits are not comparable with the run that saved them.
void SayIfOtherKernels(const Restored& r, uint64_t mine, int rank, bool from_memory) {
  if (mine == 0) return;
  for (uint64_t theirs : r.numerics) {
    if (theirs == mine) continue;
    SLOG(WARNING) << absl::StrFormat(
        "rank %d restored step %d from %s saved by a worker whose numerics fingerprint is 0x%016x; this worker's is "
        "0x%016x (other kernels): from step %d this run's bits are not comparable with the run that saved it "
        "(docs/operations.md, \"Failure modes\")",
        rank, r.step, from_memory ? "a snapshot" : "a checkpoint", theirs, mine, r.step);
    return;
  }
}

// The state `p` starts from: a snapshot in memory, the checkpoint at
// options.restore_dir, checkpoint.init_from, or (none of them) the
// initialised parameters, which become the first outer step's anchor.
absl::Status RestoreInto(const config::JobConfig& config, Collectives& comm, const TrainOptions& options,
                         Prepared* pp) {
  Prepared& p = *pp;
  const FlatLayout& layout = p.model->layout();
  const bool stage3 = config.collective().zero_stage() == 3;
  RestoreSource source;
  source.env = options.env;
  source.memory_step = options.memory_restore_step;
  source.memory_world = options.memory_restore_world;
  source.memory = options.memory;
  source.disk_dir = options.restore_dir;
  source.init_from = config.checkpoint().init_from();
  source.gather_params = !stage3;
  if (options.island_rings != nullptr) {
    const IslandPlace& place = options.island_rings->place;
    source.island = place.island;
    source.islands = place.islands;
    source.world = place.world;
  }
  ASSIGN_OR_RETURN(RestoredState restored, RestoreState(source, layout, p.buckets, comm,
                                                        absl::MakeSpan(p.state.params), p.optimizer.get()));
  if (restored.restored.has_value()) {
    const Restored& r = *restored.restored;
    ASSIGN_OR_RETURN(p.state.next_step, p.pipeline->Restore(r.position));
    if (p.state.next_step != r.step) {
      return absl::DataLossError(
          restored.from_memory
              ? absl::StrFormat("in-memory snapshot of step %d has the data position of step %d", r.step,
                                p.state.next_step)
              : absl::StrFormat("%s: saved at step %d but its data position is step %d", options.restore_dir, r.step,
                                p.state.next_step));
    }
    p.best->Reset(r.best.step, r.best.value);
    SayIfOtherKernels(r, p.numerics, comm.rank(), restored.from_memory);
    if (options.observer != nullptr) options.observer->OnOverhead(Overhead::kRestore, restored.seconds);
  } else if (p.outer != nullptr) {
    p.outer->SetAnchor(p.state.params.data());  // a start: the first outer step's reference
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Prepared> Prepare(const config::JobConfig& config, const TrainingData& data, Collectives& comm,
                                 const TrainOptions& options) {
  const int global_batch = config.data().global_batch_size();
  if (global_batch > data.train.num_examples) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "config field data.global_batch_size: %d exceeds the %d training examples of %s", global_batch,
        data.train.num_examples, data.train.source));
  }
  Prepared p;
  ASSIGN_OR_RETURN(p.islands, IslandsOf(config, comm, options));
  const ModelOptions model_options = ModelOptionsOf(config.train());
  RETURN_IF_ERROR(CheckPrecisionSupported(model_options.precision));
  if (model_options.precision == Precision::kBfloat16 && ProcessBf16Kernel() == Bf16Kernel::kWidened &&
      comm.rank() == 0) {
    SLOG(INFO) << "train.precision BF16 with bfloat16 operands " << Bf16KernelName(ProcessBf16Kernel())
               << " (matrix-product ISA " << CpuMatmulIsa()
               << "): expect float32's speed or a little less, not bfloat16's; the memory saving holds";
  }
  ASSIGN_OR_RETURN(p.model, CreateModel(config.model(), InputOf(data.train), model_options));
  const FlatLayout& layout = p.model->layout();
  p.total_steps = TotalSteps(config, data.train.num_examples);
  if (p.total_steps > std::numeric_limits<int32_t>::max()) {
    // metrics.jsonl writes steps as JSON numbers through an int32 field.
    return absl::InvalidArgumentError(absl::StrFormat(
        "config fields train.total_steps / train.epochs: %d steps is more than the %d a run may have", p.total_steps,
        std::numeric_limits<int32_t>::max()));
  }
  p.buckets = GradientBuckets(config, layout);
  // Before anything large is allocated: refused if the plan does not fit.
  p.memory_plan = PlanMemory(config, *p.model, p.buckets, data, p.islands);
  RETURN_IF_ERROR(CheckMemoryLimit(p.memory_plan, config, data, comm, options.env));
  if (options.on_numerics) {
    const Stopwatch canary(options.env);
    NumericsMemo once;
    bool computed = true;
    NumericsMemo& memo = options.numerics_memo != nullptr ? *options.numerics_memo : once;
    ASSIGN_OR_RETURN(NumericsFingerprint numerics, memo.Get(config, InputOf(data.train), &computed));
    numerics.seconds = computed ? canary.ElapsedSeconds() : 0;  // 0: this process's earlier one
    p.numerics = numerics.fingerprint;
    options.on_numerics(numerics);
  }
  ASSIGN_OR_RETURN(p.optimizer, Optimizer::Create(config.optimizer(), layout,
                                                  OwnedPieces(p.buckets, comm.rank(), comm.world_size())));
  if (p.islands.outer_steps) {  // the outer state of the same pieces beside the inner
    auto outer = std::make_unique<OuterOptimizer>(std::move(p.optimizer), layout, config.collective().diloco());
    p.outer = outer.get();
    p.optimizer = std::move(outer);
  }
  p.pipeline = std::make_unique<BatchPipeline>(data.train.num_examples, global_batch, config.data().shuffle_seed(),
                                               PermutationFor(data.train));
  p.pipeline->set_tokenizer_sha256(data.tokenizer_sha256);
  p.schedule = std::make_unique<LrSchedule>(config.schedule(), p.total_steps);
  p.best = std::make_unique<BestEval>(config.checkpoint());
  // Laid out whole but charged only where written: at ZeRO stage 3 a rank
  // writes its own pieces only (init is a pure function of each element).
  const bool stage3 = config.collective().zero_stage() == 3;
  p.state.params.resize(static_cast<size_t>(layout.total_size()));
  // A restore from memory writes every parameter (own pieces, then the
  // all-gather of every bucket): initialising them first would only add
  // seconds to a recovery at large models.
  if (options.memory_restore_step <= 0) {
    const std::vector<Range> mine =
        stage3 ? p.optimizer->pieces() : std::vector<Range>{Range{0, layout.total_size()}};
    for (const Range& r : mine) p.model->InitRange(config.seed(), r, p.state.params.data() + r.begin);
  }
  RETURN_IF_ERROR(RestoreInto(config, comm, options, &p));
  return p;
}

namespace {

const char* FamilyName(const config::ModelConfig& m) {
  return m.has_gpt() ? "a GPT" : m.has_vit() ? "a ViT" : m.has_cnn() ? "a CNN" : "an MLP";
}

}  // namespace

void Announce(const config::JobConfig& config, const Prepared& p, const Collectives& comm, bool show,
              StepObserver* observer) {
  const Model& model = *p.model;
  if (show) {
    SLOG(INFO) << absl::StrFormat(
        "training %d steps (%d per epoch, global batch %d) of %s with %d parameters, "
        "%d training FLOPs per example, world size %d, matrix products in %s",
        p.total_steps, p.pipeline->steps_per_epoch(), config.data().global_batch_size(), FamilyName(config.model()),
        model.layout().total_size(), model.TrainFlopsPerExample(), comm.world_size(),
        config.train().precision() == config::BF16 ? "BF16 (oneDNN bfloat16, float32 accumulation and master state)"
                                                   : "FP32 (OpenBLAS)");
  }
  if (observer == nullptr) return;
  RunInfo info;
  info.rank = comm.rank();
  info.world_size = comm.world_size();
  info.total_steps = p.total_steps;
  info.parameters = model.layout().total_size();
  info.owned_parameters = p.optimizer->size();
  for (const StateBuffer* b : p.optimizer->state()) info.optimizer_state_floats += static_cast<int64_t>(b->values.size());
  info.flops_per_example = model.TrainFlopsPerExample();
  info.global_batch_size = config.data().global_batch_size();
  info.bf16 = config.train().precision() == config::BF16;
  observer->OnStart(info);
}

}  // namespace shardline
