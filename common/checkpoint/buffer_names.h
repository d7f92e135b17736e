// The names of the float buffers a checkpoint shard holds
// (docs/checkpoint_format.md): the parameters and each optimizer state.
// Defined once; the writer, the restore, export and the optimizers use these.
#ifndef SHARDLINE_COMMON_CHECKPOINT_BUFFER_NAMES_H_
#define SHARDLINE_COMMON_CHECKPOINT_BUFFER_NAMES_H_

namespace shardline {

inline constexpr char kParamsBuffer[] = "params";
inline constexpr char kMomentumBuffer[] = "momentum";  // SGD with momentum
inline constexpr char kAdamMBuffer[] = "adam_m";       // AdamW first moment
inline constexpr char kAdamVBuffer[] = "adam_v";       // AdamW second moment
// Islands (collective.islands): the parameters at the last outer step and
// the outer Nesterov momentum, the same in every island.
inline constexpr char kOuterParamsBuffer[] = "outer_params";
inline constexpr char kOuterMomentumBuffer[] = "outer_momentum";

}  // namespace shardline

#endif  // SHARDLINE_COMMON_CHECKPOINT_BUFFER_NAMES_H_
