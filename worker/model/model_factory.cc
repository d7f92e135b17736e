#include "worker/model/model_factory.h"

#include "common/platform/status_macros.h"
#include "worker/model/cnn.h"
#include "worker/model/mlp.h"

namespace shardline {

absl::StatusOr<std::unique_ptr<Model>> CreateModel(const config::ModelConfig& config, const InputShape& input) {
  if (config.has_mlp()) {
    MlpSpec spec;
    spec.input_dim = input.features();
    spec.hidden_sizes.assign(config.mlp().hidden_sizes().begin(), config.mlp().hidden_sizes().end());
    spec.num_classes = input.num_classes;
    spec.activation = config.mlp().activation();
    return std::make_unique<Mlp>(std::move(spec));
  }
  if (config.has_cnn()) {
    CnnSpec spec;
    spec.input = input;
    for (const config::ConvLayerConfig& c : config.cnn().conv()) {
      spec.conv.push_back(CnnSpec::Conv{c.channels(), c.kernel_size(), c.pool()});
    }
    spec.dense_sizes.assign(config.cnn().dense_sizes().begin(), config.cnn().dense_sizes().end());
    ASSIGN_OR_RETURN(std::unique_ptr<Cnn> cnn, Cnn::Create(std::move(spec)));
    return std::unique_ptr<Model>(std::move(cnn));
  }
  return absl::InvalidArgumentError("config field model: set model.mlp or model.cnn");
}

}  // namespace shardline
