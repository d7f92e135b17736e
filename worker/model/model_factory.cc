#include "worker/model/model_factory.h"

#include "common/platform/status_macros.h"
#include "worker/model/cnn.h"
#include "worker/model/gpt.h"
#include "worker/model/vit.h"
#include "worker/model/mlp.h"

namespace shardline {

ModelOptions ModelOptionsOf(const config::TrainConfig& train) {
  ModelOptions options;
  options.remat = train.remat();
  options.precision = train.precision() == config::BF16 ? Precision::kBfloat16 : Precision::kFloat32;
  return options;
}

absl::StatusOr<std::unique_ptr<Model>> CreateModel(const config::ModelConfig& config, const InputShape& input,
                                                   const ModelOptions& options) {
  if ((config.has_mlp() || config.has_cnn() || config.has_vit()) && input.is_sequence()) {
    return absl::InvalidArgumentError(
        "config field model: model.mlp, model.cnn and model.vit read images, not text (data.text)");
  }
  if (config.has_vit()) {
    VitSpec spec;
    spec.input = input;
    spec.patch = config.vit().patch();
    spec.layers = config.vit().layers();
    spec.d_model = config.vit().d_model();
    spec.heads = config.vit().heads();
    spec.mlp_ratio = config.vit().mlp_ratio();
    spec.class_token = config.vit().pool() != config::VitConfig::MEAN;
    spec.remat = options.remat;
    spec.precision = options.precision;
    return Vit::Create(spec);
  }
  if (config.has_gpt()) {
    if (!input.is_sequence()) return absl::InvalidArgumentError("config field model.gpt: reads text; set data.text");
    GptSpec spec;
    spec.vocab = input.num_classes;
    spec.context = config.gpt().context();
    spec.layers = config.gpt().layers();
    spec.d_model = config.gpt().d_model();
    spec.heads = config.gpt().heads();
    spec.mlp_ratio = config.gpt().mlp_ratio();
    spec.remat = options.remat;
    spec.precision = options.precision;
    return Gpt::Create(spec);
  }
  if (config.has_mlp()) {
    MlpSpec spec;
    spec.input_dim = input.features();
    spec.hidden_sizes.assign(config.mlp().hidden_sizes().begin(), config.mlp().hidden_sizes().end());
    spec.num_classes = input.num_classes;
    spec.activation = config.mlp().activation();
    spec.precision = options.precision;
    return std::make_unique<Mlp>(std::move(spec));
  }
  if (config.has_cnn()) {
    CnnSpec spec;
    spec.input = input;
    for (const config::ConvLayerConfig& c : config.cnn().conv()) {
      spec.conv.push_back(CnnSpec::Conv{c.channels(), c.kernel_size(), c.pool()});
    }
    spec.dense_sizes.assign(config.cnn().dense_sizes().begin(), config.cnn().dense_sizes().end());
    spec.precision = options.precision;
    ASSIGN_OR_RETURN(std::unique_ptr<Cnn> cnn, Cnn::Create(std::move(spec)));
    return std::unique_ptr<Model>(std::move(cnn));
  }
  return absl::InvalidArgumentError("config field model: set model.mlp, model.cnn, model.gpt or model.vit");
}

}  // namespace shardline
