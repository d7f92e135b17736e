#include "worker/checkpoint/save_restore.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/checkpoint/buffer_names.h"
#include "common/checkpoint/checkpoint_dir.h"
#include "common/checkpoint/verify.h"
#include "common/job/shard.h"
#include "common/platform/logging.h"
#include "common/platform/status_macros.h"
#include "common/platform/status_payload.h"
#include "common/platform/clock.h"

namespace shardline {

absl::Status LocalCommitter::ShardSaved(int64_t step, int rank, int world, const WrittenShard& shard) {
  state::CheckpointManifest m;
  m.set_step(step);
  m.set_world_size(world);
  m.set_job_id(job_id_);
  state::ShardEntry* e = m.add_shards();
  e->set_rank(rank);
  e->set_file(shard.path.substr(shard.path.rfind('/') + 1));
  e->set_size(shard.size);
  e->set_crc32c(shard.crc32c);
  if (shard.numerics != 0) e->set_numerics(shard.numerics);
  const std::string dir = StepDir(root_, step);
  RETURN_IF_ERROR(CheckManifest(m, dir));
  RETURN_IF_ERROR(CheckShardFiles(env_, dir, m));
  RETURN_IF_ERROR(WriteCommitted(env_, dir, m));
  SLOG(INFO) << "committed checkpoint at step " << step << (shard.best ? " (new best)" : "");
  return FinishCommit(env_, root_, policy_, step, shard.best ? std::optional<double>(shard.best_value) : std::nullopt,
                      pinned_ > 0 ? std::vector<int64_t>{pinned_} : std::vector<int64_t>{})
      .status();
}

namespace {

// The shard's header, and its buffers named but empty.
ShardContents ShardHeaderOf(const ShardSource& source) {
  const std::vector<Range>& pieces = source.optimizer->pieces();
  ShardContents c;
  if (source.best.step >= 0) {
    c.header.set_best_step(source.best.step);
    c.header.set_best_value(source.best.value);
  }
  c.header.set_step(source.step);
  c.header.set_world_size(source.world);
  c.header.set_rank(source.rank);
  if (source.islands > 1) c.header.set_islands(source.islands);
  if (source.numerics != 0) c.header.set_numerics(source.numerics);
  c.header.set_job_id(source.job_id);
  c.header.set_total_size(source.layout->total_size());
  SetShardPieces(pieces, &c.header);
  c.header.set_optimizer_steps(source.step);
  *c.header.mutable_data_position() = source.position;
  for (const TensorInfo& t : source.layout->tensors()) {
    state::TensorEntry* e = c.header.add_tensors();
    e->set_name(t.name);
    for (int64_t d : t.shape) e->add_shape(d);
    e->set_dtype("f32");
    e->set_offset(t.offset);
  }
  c.buffers.push_back(ShardBuffer{kParamsBuffer, {}, {}});
  for (StateBuffer* b : source.optimizer->state()) c.buffers.push_back(ShardBuffer{b->name, {}, {}});
  return c;
}

}  // namespace

ShardContents SnapshotShard(const ShardSource& source) {
  ShardContents c = ShardHeaderOf(source);
  std::vector<float>& params = c.buffers[0].values;
  params.reserve(static_cast<size_t>(source.optimizer->size()));
  for (const Range& p : source.optimizer->pieces()) {
    params.insert(params.end(), source.params + p.begin, source.params + p.end);
  }
  std::vector<StateBuffer*> state = source.optimizer->state();
  for (size_t i = 0; i < state.size(); ++i) c.buffers[i + 1].values = state[i]->values;
  return c;
}

ShardContents ViewShard(const ShardSource& source) {
  ShardContents c = ShardHeaderOf(source);
  for (const Range& p : source.optimizer->pieces()) {
    c.buffers[0].parts.push_back(absl::MakeConstSpan(source.params + p.begin, static_cast<size_t>(p.size())));
  }
  std::vector<StateBuffer*> state = source.optimizer->state();
  for (size_t i = 0; i < state.size(); ++i) c.buffers[i + 1].parts.push_back(absl::MakeConstSpan(state[i]->values));
  return c;
}

absl::StatusOr<WrittenShard> WriteSnapshot(Env* env, const std::string& root, ShardContents snapshot) {
  const std::string dir = StepDir(root, snapshot.header.step());
  RETURN_IF_ERROR(env->CreateDirs(dir));
  const std::string name = ShardFileName(snapshot.header.rank(), snapshot.header.world_size());
  return WriteShard(env, dir, name, std::move(snapshot));
}

namespace {
constexpr char kSaveFailedUrl[] = "type.shardline/save_failed_step";
}  // namespace

absl::Status SaveFailedError(int64_t step, const absl::Status& cause) {
  return WithIntPayload(absl::Status(cause.code(), cause.message()), kSaveFailedUrl, step);
}

int64_t SaveFailedStep(const absl::Status& status) { return IntPayload(status, kSaveFailedUrl); }

ShardSaver::~ShardSaver() { Wait().IgnoreError(); }

absl::Status ShardSaver::WriteAndReport(ShardContents snapshot) {
  const int64_t step = snapshot.header.step();
  const int rank = snapshot.header.rank(), world = snapshot.header.world_size();
  absl::StatusOr<WrittenShard> w = WriteSnapshot(env_, root_, std::move(snapshot));
  if (!w.ok()) return SaveFailedError(step, w.status());
  return sink_ != nullptr ? sink_->ShardSaved(step, rank, world, *w) : absl::OkStatus();
}

absl::Status ShardSaver::Wait() {
  if (thread_.joinable()) thread_.join();
  absl::Status s = background_;
  background_ = absl::OkStatus();
  return s;
}

absl::Status ShardSaver::Save(const ShardSource& source) {
  const Stopwatch start(env_);
  absl::Status previous = Wait();
  if (previous.ok() && !async_) {
    previous = WriteAndReport(ViewShard(source));  // written from where it is: no copy of the shard
  } else if (previous.ok()) {
    {
      MutexLock lock(&mu_);
      snapshot_pending_ = true;
    }
    thread_ = std::thread([this, source] {
      ShardContents c = SnapshotShard(source);
      {
        MutexLock lock(&mu_);
        snapshot_pending_ = false;
      }
      background_ = WriteAndReport(std::move(c));
    });
  }
  stall_seconds_ += start.ElapsedSeconds();
  return previous;
}

void ShardSaver::AwaitSnapshot() {
  const Stopwatch start(env_);
  MutexLock lock(&mu_);
  auto taken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !snapshot_pending_; };
  mu_.Await(absl::Condition(&taken));
  stall_seconds_ += start.ElapsedSeconds();
}

absl::StatusOr<Restored> RestoreCheckpoint(Env* env, const std::string& step_dir, const FlatLayout& layout,
                                           float* params, Optimizer* optimizer, int island, int islands) {
  const std::vector<Range>& mine = optimizer->pieces();
  std::vector<StateBuffer*> state = optimizer->state();
  int64_t params_filled = 0;
  std::vector<int64_t> state_filled(state.size(), 0);
  VerifyOptions verify;
  // The format checks are VerifyCheckpoint's; this adds only "is it this
  // run's model", before any payload is read.
  verify.on_header = [&](const state::ShardHeader& h) -> absl::Status {
    const std::string path = step_dir + "/" + ShardFileName(h.rank(), h.world_size());
    if (h.total_size() != layout.total_size() || h.tensors_size() != static_cast<int>(layout.tensors().size())) {
      return absl::FailedPreconditionError(absl::StrCat(path, " holds a model of ", h.total_size(),
                                                        " parameters; this run's model has ", layout.total_size()));
    }
    for (int t = 0; t < h.tensors_size(); ++t) {
      const TensorInfo& info = layout.tensor(t);
      const state::TensorEntry& te = h.tensors(t);
      if (te.name() != info.name || std::vector<int64_t>(te.shape().begin(), te.shape().end()) != info.shape) {
        return absl::FailedPreconditionError(absl::StrCat(path, ": tensor ", t, " is ", te.name(),
                                                          "; this run's model has ", info.name, " of another shape"));
      }
    }
    return absl::OkStatus();
  };
  verify.place = [&](const state::ShardHeader& h, const state::BufferEntry& b) -> absl::StatusOr<Placements> {
    if (b.name() == kParamsBuffer) {
      params_filled += b.floats();
      return PlacePiecesAt(h, params);
    }
    // Optimizer state: only what this rank's (possibly other) pieces share.
    Placements out;
    const std::vector<PieceCopy> runs = SharedRuns(ShardPieces(h), mine);
    if (runs.empty()) return out;
    size_t k = 0;
    while (k < state.size() && state[k]->name != b.name()) ++k;
    if (k == state.size()) {
      return absl::FailedPreconditionError(absl::StrCat(step_dir, ": shard of rank ", h.rank(), " has optimizer state '",
                                                        b.name(), "', which this run's optimizer does not use"));
    }
    for (const PieceCopy& run : runs) {
      state_filled[k] += run.size;
      out.push_back(Placement{state[k]->values.data() + run.to, run.from, run.from + run.size});
    }
    return out;
  };
  verify.islands = islands;
  verify.only_island = island;
  ASSIGN_OR_RETURN(VerifiedCheckpoint v, VerifyCheckpoint(env, step_dir, verify));
  if (params_filled != layout.total_size()) {
    return absl::DataLossError(absl::StrCat(step_dir, ": shards hold ", params_filled, " of ", layout.total_size(),
                                            " parameters"));
  }
  for (size_t k = 0; k < state.size(); ++k) {
    if (state_filled[k] != optimizer->size()) {
      return absl::FailedPreconditionError(absl::StrCat(step_dir, ": optimizer state '", state[k]->name,
                                                        "' is missing from the checkpoint"));
    }
  }
  Restored out;
  out.step = v.manifest.step();
  for (const state::ShardEntry& e : v.manifest.shards()) out.bytes_read += e.size();
  for (const state::ShardHeader& h : v.headers) NoteNumerics(h, &out);
  const state::ShardHeader& last = v.headers.back();
  out.position = last.data_position();
  if (last.has_best_step()) out.best = BestSoFar{last.best_step(), last.best_value()};
  return out;
}

void NoteNumerics(const state::ShardHeader& header, Restored* r) {
  if (!header.has_numerics()) return;
  if (std::find(r->numerics.begin(), r->numerics.end(), header.numerics()) == r->numerics.end()) {
    r->numerics.push_back(header.numerics());
  }
}

}  // namespace shardline
