#include "common/job/config.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

// ValidateConfig: every field's own rule, collected, so a config with three
// mistakes names all three at once.

namespace shardline {
namespace {
// Collects validation problems as "field: problem".
class Problems {
 public:
  void Add(absl::string_view field, absl::string_view problem) {
    list_.push_back(absl::StrCat("config field ", field, ": ", problem));
  }
  void Positive(absl::string_view field, double v) {
    if (!(v > 0) || !std::isfinite(v)) Add(field, absl::StrCat("must be positive, got ", v));
  }
  void NonNegative(absl::string_view field, double v) {
    if (!(v >= 0) || !std::isfinite(v)) Add(field, absl::StrCat("must be >= 0, got ", v));
  }
  void InUnit(absl::string_view field, double v, bool include_one) {
    const bool ok = v >= 0 && (include_one ? v <= 1 : v < 1);
    if (!ok) {
      Add(field, absl::StrCat("must be in [0, 1", include_one ? "]" : ")", ", got ", v));
    }
  }
  size_t size() const { return list_.size(); }
  absl::Status ToStatus() const {
    if (list_.empty()) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrJoin(list_, "\n"));
  }

 private:
  std::vector<std::string> list_;
};



// Sizes past these are mistakes, refused naming the field before anything
// is allocated (a d_model of 1e6 would otherwise end the process with
// bad_alloc): a width, a depth, a context, and parameters in all.
constexpr int kMaxWidth = 1 << 16;
constexpr int kMaxDepth = 1 << 12;
constexpr int kMaxContext = 1 << 20;
constexpr int kMaxMlpRatio = 64;
constexpr double kMaxModelParameters = double{int64_t{1} << 32};

// Refuses a model whose transformer blocks alone pass kMaxModelParameters:
// each has about (4 + 2 * mlp_ratio) * d_model^2 weights.
void CheckTransformerSize(const char* family, int layers, int d_model, int mlp_ratio, Problems* p) {
  const double per_block = (4.0 + 2.0 * mlp_ratio) * static_cast<double>(d_model) * d_model;
  const double params = per_block * layers;
  if (params > kMaxModelParameters) {
    p->Add(absl::StrCat("model.", family), absl::StrCat("layers ", layers, " x d_model ", d_model, " x mlp_ratio ",
                                                        mlp_ratio, " is about ", absl::SixDigits(params),
                                                        " parameters, over the ", kMaxModelParameters,
                                                        " a worker can hold"));
  }
}

// The model's own fields; whether its layers fit the data set's images is
// checked when the model is built (CreateModel), which knows their size.
void ValidateModel(const config::ModelConfig& model, Problems* p) {
  const size_t problems_before = p->size();
  // Positive and at most `max`.
  auto in_range = [&](const std::string& field, int64_t v, int64_t max) {
    if (v <= 0) {
      p->Add(field, absl::StrCat("must be positive, got ", v));
    } else if (v > max) {
      p->Add(field, absl::StrCat(v, " is over the largest allowed, ", max));
    }
  };
  if (model.has_mlp()) {
    const config::MlpConfig& mlp = model.mlp();
    if (mlp.hidden_sizes_size() == 0) {
      p->Add("model.mlp.hidden_sizes", "must list at least one hidden layer width");
    }
    if (mlp.hidden_sizes_size() > kMaxDepth) {
      p->Add("model.mlp.hidden_sizes", absl::StrCat(mlp.hidden_sizes_size(), " layers is over ", kMaxDepth));
    }
    for (int i = 0; i < mlp.hidden_sizes_size(); ++i) {
      in_range(absl::StrCat("model.mlp.hidden_sizes[", i, "]"), mlp.hidden_sizes(i), kMaxWidth);
    }
    if (mlp.activation() == config::ACTIVATION_UNSPECIFIED) p->Add("model.mlp.activation", "must be RELU or TANH");
  } else if (model.has_cnn()) {
    const config::CnnConfig& cnn = model.cnn();
    if (cnn.conv_size() == 0) p->Add("model.cnn.conv", "must list at least one convolution layer");
    for (int i = 0; i < cnn.conv_size(); ++i) {
      const config::ConvLayerConfig& conv = cnn.conv(i);
      in_range(absl::StrCat("model.cnn.conv[", i, "].channels"), conv.channels(), kMaxWidth);
      if (conv.kernel_size() <= 0 || conv.kernel_size() % 2 == 0 || conv.kernel_size() > 63) {
        p->Add(absl::StrCat("model.cnn.conv[", i, "].kernel_size"),
               absl::StrCat("must be odd, positive and at most 63 (same padding), got ", conv.kernel_size()));
      }
    }
    if (cnn.conv_size() > kMaxDepth || cnn.dense_sizes_size() > kMaxDepth) {
      p->Add("model.cnn", absl::StrCat("more than ", kMaxDepth, " layers"));
    }
    for (int i = 0; i < cnn.dense_sizes_size(); ++i) {
      in_range(absl::StrCat("model.cnn.dense_sizes[", i, "]"), cnn.dense_sizes(i), kMaxWidth);
    }
  } else if (model.has_gpt()) {
    const config::GptConfig& gpt = model.gpt();
    in_range("model.gpt.context", gpt.context(), kMaxContext);
    in_range("model.gpt.layers", gpt.layers(), kMaxDepth);
    in_range("model.gpt.d_model", gpt.d_model(), kMaxWidth);
    in_range("model.gpt.heads", gpt.heads(), kMaxWidth);
    in_range("model.gpt.mlp_ratio", gpt.mlp_ratio(), kMaxMlpRatio);
    if (gpt.heads() > 0 && gpt.d_model() % gpt.heads() != 0) {
      p->Add("model.gpt.heads", absl::StrCat(gpt.heads(), " does not divide d_model ", gpt.d_model()));
    }
    if (p->size() == problems_before) CheckTransformerSize("gpt", gpt.layers(), gpt.d_model(), gpt.mlp_ratio(), p);
  } else if (model.has_vit()) {
    const config::VitConfig& vit = model.vit();
    in_range("model.vit.patch", vit.patch(), kMaxWidth);
    in_range("model.vit.layers", vit.layers(), kMaxDepth);
    in_range("model.vit.d_model", vit.d_model(), kMaxWidth);
    in_range("model.vit.heads", vit.heads(), kMaxWidth);
    in_range("model.vit.mlp_ratio", vit.mlp_ratio(), kMaxMlpRatio);
    if (vit.heads() > 0 && vit.d_model() % vit.heads() != 0) {
      p->Add("model.vit.heads", absl::StrCat(vit.heads(), " does not divide d_model ", vit.d_model()));
    }
    if (p->size() == problems_before) CheckTransformerSize("vit", vit.layers(), vit.d_model(), vit.mlp_ratio(), p);
    if (vit.pool() == config::VitConfig::POOL_UNSPECIFIED) p->Add("model.vit.pool", "must be CLASS_TOKEN or MEAN");
  } else {
    p->Add("model", "set model.mlp, model.cnn, model.gpt or model.vit");
  }
}


void ValidateData(const config::JobConfig& c, Problems* p) {
  const auto& data = c.data();
  if (data.has_tokens()) {
    if (data.tokens().dir().empty()) p->Add("data.tokens.dir", "must name a directory of token shards");
    if (data.has_text()) p->Add("data.tokens", "and data.text are two inputs: set one");
    if (!c.model().has_gpt()) p->Add("data.tokens", "is read by a sequence model: set model.gpt");
  } else if (data.has_text()) {
    if (data.text().train_path().empty()) p->Add("data.text.train_path", "must name the training text file");
    if (data.text().val_path().empty()) p->Add("data.text.val_path", "must name the validation text file");
    if (!c.model().has_gpt()) p->Add("data.text", "is read by a sequence model: set model.gpt");
  } else {
    if (data.dir().empty()) p->Add("data.dir", "must name the data set directory");
    if (c.model().has_gpt()) {
      p->Add("model.gpt", "reads text: set data.text.train_path and data.text.val_path, or data.tokens.dir");
    }
  }
  p->Positive("data.global_batch_size", data.global_batch_size());
  p->Positive("data.eval_batch_size", data.eval_batch_size());
}

void ValidateRuntime(const config::JobConfig& c, Problems* p) {
  const auto& rt = c.runtime();
  p->Positive("runtime.num_workers", rt.num_workers());
  p->Positive("runtime.blas_threads", rt.blas_threads());
  p->Positive("runtime.watchdog_timeout_seconds", rt.watchdog_timeout_seconds());
  p->Positive("runtime.collective_timeout_seconds", rt.collective_timeout_seconds());
  if (rt.min_workers() < 0 || (rt.num_workers() > 0 && rt.min_workers() > rt.num_workers())) {
    p->Add("runtime.min_workers", absl::StrCat("must be 0 (no elastic worlds) or between 1 and runtime.num_workers (",
                                              rt.num_workers(), "), got ", rt.min_workers()));
  }
  p->Positive("runtime.replace_timeout_seconds", rt.replace_timeout_seconds());
  if (rt.memory_margin_percent() < 0 || rt.memory_margin_percent() > 50) {
    p->Add("runtime.memory_margin_percent", absl::StrCat("must be in [0, 50], got ", rt.memory_margin_percent()));
  }
  if (rt.memory_limit_mb() < 0 || rt.memory_limit_mb() > (int64_t{1} << 30)) {
    p->Add("runtime.memory_limit_mb", absl::StrCat("must be 0 (no limit) or a positive number of MiB, got ",
                                                  rt.memory_limit_mb()));
  }
}

// Islands (collective.islands, collective.diloco): everything that involves
// the whole world at once - evaluations, checkpoints, stops - happens at
// outer steps, where every island holds the same parameters.
void ValidateIslands(const config::JobConfig& c, Problems* p) {
  const int k = c.collective().islands();
  const int n = c.runtime().num_workers();
  if (k < 1 || (n > 0 && n % k != 0)) {
    p->Add("collective.islands", absl::StrCat("must be 1 or more and divide runtime.num_workers (", n, "), got ", k));
    return;
  }
  const auto& d = c.collective().diloco();
  const int min_islands = c.runtime().min_islands();
  if (min_islands < 0 || min_islands > k || (min_islands > 0 && k == 1)) {
    p->Add("runtime.min_islands",
           k == 1 ? absl::StrCat("needs islands to lose (collective.islands above 1), got ", min_islands)
                  : absl::StrCat("must be 0 (wait for every island) or between 1 and collective.islands (", k,
                                 "), got ", min_islands));
  }
  // One island takes outer steps only when diloco is set (Lookahead).
  if (k == 1 && !c.collective().has_diloco()) return;
  if (d.inner_steps() < 1) {
    p->Add("collective.diloco.inner_steps", absl::StrCat("must be 1 or more, got ", d.inner_steps()));
    return;
  }
  if (!(d.outer_lr() > 0 && d.outer_lr() <= 10)) {
    p->Add("collective.diloco.outer_lr", absl::StrCat("must be in (0, 10], got ", d.outer_lr()));
  }
  if (!(d.outer_momentum() >= 0 && d.outer_momentum() < 1)) {
    p->Add("collective.diloco.outer_momentum", absl::StrCat("must be in [0, 1), got ", d.outer_momentum()));
  }
  const int64_t h = d.inner_steps();
  auto on_outer_steps = [&](const char* field, int64_t every) {
    if (every > 0 && every % h != 0) {
      p->Add(field, absl::StrCat(every, " is not a multiple of collective.diloco.inner_steps (", h,
                                 "): with islands it happens at outer steps only"));
    }
  };
  on_outer_steps("train.eval_every", c.train().eval_every());
  on_outer_steps("checkpoint.every_steps", c.checkpoint().every_steps());
  on_outer_steps("checkpoint.memory_every_steps", c.checkpoint().memory_every_steps());
  if (c.runtime().min_workers() > 0) {
    p->Add("runtime.min_workers", "a world of islands shrinks and grows by whole islands: set it to 0 and use "
                                  "runtime.min_islands");
  }
}

void ValidateCollective(const config::JobConfig& c, Problems* p) {
  const double cap = c.collective().bucket_cap_mb();
  if (!(cap >= 0 && cap <= 1 << 20)) {  // also NaN
    p->Add("collective.bucket_cap_mb", absl::StrCat("must be between 0 (one bucket) and 1048576 MiB, got ", cap));
  }
  const int stage = c.collective().zero_stage();
  if (stage != 2 && stage != 3) {
    p->Add("collective.zero_stage", absl::StrCat("must be 2 (parameters whole on every worker) or 3 (sharded), got ",
                                                 stage));
  }
  if (c.collective().prefetch_buckets() < 0) {
    p->Add("collective.prefetch_buckets", absl::StrCat("must be 0 or more, got ", c.collective().prefetch_buckets()));
  }
  ValidateIslands(c, p);
}

void ValidateTrain(const config::JobConfig& c, Problems* p) {
  const auto& data = c.data();
  const auto& rt = c.runtime();
  const auto& train = c.train();
  p->Positive("train.grad_accum_steps", train.grad_accum_steps());
  if (data.global_batch_size() > 0 && rt.num_workers() > 0 && train.grad_accum_steps() > 0) {
    // Any world size takes any batch (ranks' slices differ by at most one
    // example), as long as every micro-batch of every rank has one.
    const int64_t parts = static_cast<int64_t>(rt.num_workers()) * train.grad_accum_steps();
    if (data.global_batch_size() < parts) {
      p->Add("data.global_batch_size",
            absl::StrCat(data.global_batch_size(),
                         " is smaller than runtime.num_workers * train.grad_accum_steps (",
                         rt.num_workers(), " * ", train.grad_accum_steps(), " = ", parts,
                         "): some rank would have an empty micro-batch"));
    }
  }
  if (!train.has_total_steps() && !train.has_epochs()) {
    p->Add("train", "set total_steps or epochs");
  } else if (train.has_total_steps()) {
    p->Positive("train.total_steps", static_cast<double>(train.total_steps()));
  } else {
    p->Positive("train.epochs", train.epochs());
  }
  p->NonNegative("train.grad_clip_norm", train.grad_clip_norm());
  p->Positive("train.log_every", static_cast<double>(train.log_every()));
  p->NonNegative("train.eval_every", static_cast<double>(train.eval_every()));
  if (train.precision() == config::PRECISION_UNSPECIFIED) p->Add("train.precision", "must be FP32 or BF16");
  for (int i = 0; i < train.trace_steps_size(); ++i) {
    if (train.trace_steps(i) <= 0) {
      p->Add(absl::StrCat("train.trace_steps[", i, "]"),
            absl::StrCat("must be a positive step count (1 is the first step), got ", train.trace_steps(i)));
    }
  }
}

void ValidateOptimizer(const config::JobConfig& c, Problems* p) {
  const auto& opt = c.optimizer();
  if (opt.has_adamw()) {
    p->InUnit("optimizer.adamw.b1", opt.adamw().b1(), false);
    p->InUnit("optimizer.adamw.b2", opt.adamw().b2(), false);
    p->Positive("optimizer.adamw.eps", opt.adamw().eps());
    p->NonNegative("optimizer.adamw.weight_decay", opt.adamw().weight_decay());
  } else {
    p->InUnit("optimizer.sgd.momentum", opt.sgd().momentum(), false);
    p->NonNegative("optimizer.sgd.weight_decay", opt.sgd().weight_decay());
  }
}

void ValidateSchedule(const config::JobConfig& c, Problems* p) {
  const auto& s = c.schedule();
  p->Positive("schedule.base_lr", s.base_lr());
  p->NonNegative("schedule.warmup_steps", static_cast<double>(s.warmup_steps()));
  if (s.decay() == config::DECAY_UNSPECIFIED) {
    p->Add("schedule.decay", "must be CONSTANT, COSINE or LINEAR");
  }
  p->InUnit("schedule.end_lr_ratio", s.end_lr_ratio(), true);
}

void ValidateAudit(const config::JobConfig& c, Problems* p) {
  p->NonNegative("audit.every_steps", c.audit().every_steps());
}

void ValidateCheckpoint(const config::JobConfig& c, Problems* p) {
  const auto& ck = c.checkpoint();
  p->NonNegative("checkpoint.every_steps", static_cast<double>(ck.every_steps()));
  p->NonNegative("checkpoint.every_seconds", ck.every_seconds());
  p->NonNegative("checkpoint.keep_last", ck.keep_last());
  p->NonNegative("checkpoint.keep_every", static_cast<double>(ck.keep_every()));
  p->NonNegative("checkpoint.memory_every_steps", static_cast<double>(ck.memory_every_steps()));
  p->Positive("checkpoint.memory_copies", ck.memory_copies());
  if (!ck.best_metric().empty() && ck.best_metric() != "accuracy" && ck.best_metric() != "loss" &&
      ck.best_metric() != "bits_per_byte") {
    p->Add("checkpoint.best_metric",
          absl::StrCat("must be \"accuracy\", \"loss\" or \"bits_per_byte\", got \"", ck.best_metric(), "\""));
  }
  if (ck.best_mode() == config::BEST_MODE_UNSPECIFIED) {
    p->Add("checkpoint.best_mode", "must be MAX or MIN");
  }
  if (ck.resume_step() < -1) {
    p->Add("checkpoint.resume_step", absl::StrCat("must be -1 (latest) or a step, got ",
                                                 ck.resume_step()));
  }
}

}  // namespace

absl::Status ValidateConfig(const config::JobConfig& c) {
  Problems p;
  ValidateModel(c.model(), &p);
  ValidateData(c, &p);
  ValidateRuntime(c, &p);
  ValidateCollective(c, &p);
  ValidateTrain(c, &p);
  ValidateOptimizer(c, &p);
  ValidateSchedule(c, &p);
  ValidateCheckpoint(c, &p);
  ValidateAudit(c, &p);
  return p.ToStatus();
}

}  // namespace shardline
