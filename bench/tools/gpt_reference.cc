// shardline-gpt-reference: what a PyTorch peer needs to check shardline's
// GPT against its own (bench/drivers/gpt_vs_torch.sh): the initial
// parameters exactly as `shardline train` makes them, the batches of the
// first steps exactly as its pipeline draws them, and the logits of the
// first batch at initialisation.
//
//   shardline-gpt-reference --config austen_gpt.textproto --steps 20 --out DIR [--set a.b=v ...]
//
// Writes DIR/init.safetensors, DIR/batches.bin (int32: per step, the
// tokens [batch, context] then the targets [batch, context]),
// DIR/logits.bin (float32 [batch * context, 256]) and DIR/meta.json.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/job/config.h"
#include "common/platform/args.h"
#include "common/platform/env.h"
#include "common/platform/process_init.h"
#include "common/platform/status_macros.h"
#include "worker/checkpoint/safetensors.h"
#include "worker/data/dataset.h"
#include "worker/data/pipeline.h"
#include "worker/model/gpt.h"
#include "worker/model/model_factory.h"

namespace shardline {
namespace {

absl::Status Run(const Args& args) {
  Env* env = Env::Default();
  ASSIGN_OR_RETURN(config::JobConfig cfg, LoadConfig(env, args.Get("config"), args.GetAll("set")));
  if (!cfg.model().has_gpt()) return absl::InvalidArgumentError("--config: not a GPT (model.gpt)");
  ASSIGN_OR_RETURN(int64_t steps, IntFlag(args, "steps", 20));
  const std::string out = args.Get("out");
  if (out.empty()) return absl::InvalidArgumentError("--out is required");
  RETURN_IF_ERROR(env->CreateDirs(out));
  ASSIGN_OR_RETURN(TrainingData data, LoadTrainingData(env, cfg));
  InputShape input{1, 1, cfg.model().gpt().context(), 256, cfg.model().gpt().context()};
  // In the job's precision (train.precision), as `shardline train` runs it.
  ASSIGN_OR_RETURN(std::unique_ptr<Model> model, CreateModel(cfg.model(), input, ModelOptionsOf(cfg.train())));
  const FlatLayout& layout = model->layout();
  std::vector<float> params(static_cast<size_t>(layout.total_size()));
  model->InitRange(cfg.seed(), Range{0, layout.total_size()}, params.data());  // as RunTraining does
  std::vector<state::TensorEntry> tensors;
  for (const TensorInfo& t : layout.tensors()) {
    state::TensorEntry& e = tensors.emplace_back();
    e.set_name(t.name);
    for (int64_t d : t.shape) e.add_shape(d);
    e.set_dtype("f32");
    e.set_offset(t.offset);
  }
  RETURN_IF_ERROR(WriteFileAtomically(env, out + "/init.safetensors", SafetensorsBytes(tensors, params, {})));

  const int batch = cfg.data().global_batch_size();
  BatchPipeline pipeline(data.train.num_examples, batch, cfg.data().shuffle_seed(), PermutationFor(data.train));
  std::string batches;
  std::vector<int64_t> indices;
  BatchData first;
  for (int64_t s = 0; s < steps; ++s) {
    pipeline.GlobalBatch(s, &indices);
    BatchData b;
    RETURN_IF_ERROR(GatherBatch(data.train, indices, &b));
    batches.append(reinterpret_cast<const char*>(b.tokens.data()), b.tokens.size() * sizeof(int32_t));
    batches.append(reinterpret_cast<const char*>(b.y.data()), b.y.size() * sizeof(int32_t));
    if (s == 0) first = b;
  }
  RETURN_IF_ERROR(WriteFileAtomically(env, out + "/batches.bin", batches));

  const std::unique_ptr<ModelWorkspace> made = model->NewWorkspace();  // in the config's precision
  GptWorkspace& ws = *static_cast<GptWorkspace*>(made.get());
  ws.keep_logits = true;
  model->Forward(params.data(), Sequences(first.tokens.data(), first.y.data(), batch), &ws);
  RETURN_IF_ERROR(WriteFileAtomically(
      env, out + "/logits.bin",
      std::string(reinterpret_cast<const char*>(ws.logits.data()), ws.logits.size() * sizeof(float))));
  const config::GptConfig& g = cfg.model().gpt();
  RETURN_IF_ERROR(WriteFileAtomically(
      env, out + "/meta.json",
      absl::StrCat("{\"context\": ", g.context(), ", \"layers\": ", g.layers(), ", \"d_model\": ", g.d_model(),
                   ", \"heads\": ", g.heads(), ", \"mlp_ratio\": ", g.mlp_ratio(), ", \"batch\": ", batch,
                   ", \"steps\": ", steps, ", \"b1\": ", cfg.optimizer().adamw().b1(),
                   ", \"b2\": ", cfg.optimizer().adamw().b2(), ", \"eps\": ", cfg.optimizer().adamw().eps(),
                   ", \"weight_decay\": ", cfg.optimizer().adamw().weight_decay(),
                   ", \"grad_clip_norm\": ", cfg.train().grad_clip_norm(), "}\n")));
  std::printf("wrote %s: init.safetensors (%zu parameters), %ld batches, logits of the first\n", out.c_str(),
              params.size(), static_cast<long>(steps));
  return absl::OkStatus();
}

}  // namespace
}  // namespace shardline

int main(int argc, char** argv) {
  shardline::InitProcess(argv[0]);
  shardline::Args args;
  absl::Status parsed = shardline::ParseArgs(argc, argv, 1, {{"config", "steps", "out"}, {"set"}},
                                             "shardline-gpt-reference", &args);
  return shardline::RunCommand(parsed, args, "usage: shardline-gpt-reference --config F --steps N --out DIR [--set ...]\n",
                               "shardline-gpt-reference", shardline::Run);
}
