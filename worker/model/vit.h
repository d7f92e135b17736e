// A Vision Transformer for images (model.vit in config.proto): the image
// cut into patch x patch squares, each a token by a linear embedding, plus
// an optional class token, learned position embeddings, the GPT's
// pre-LayerNorm blocks with full (not causal) attention
// (transformer_block.h), a final LayerNorm, then the class token's row or
// the mean of every row, and a linear head to the classes.
//
// Tensors, in flat order (docs/models.md):
//   patch_embed.proj.weight [d, C*patch*patch]  (a Conv2d's [d, C, p, p], flattened)
//   patch_embed.proj.bias [d]    cls_token [1, d] (class-token pooling only)
//   pos_embed [tokens, d]        blocks.<i>.* (transformer_block.h)
//   norm.weight [d]  norm.bias [d]  head.weight [classes, d]  head.bias [classes]
// Initialisation as the GPT's: matrices and embeddings normal(0, 0.02), the
// residual projections normal(0, 0.02 / sqrt(2 * layers)), biases 0,
// LayerNorm weights 1.
#ifndef SHARDLINE_WORKER_MODEL_VIT_H_
#define SHARDLINE_WORKER_MODEL_VIT_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/model/flat_layout.h"
#include "worker/model/model.h"
#include "worker/model/transformer_block.h"

namespace shardline {

struct VitSpec {
  InputShape input;  // images
  int patch = 4;     // divides the image's height and width
  int layers = 4;
  int d_model = 64;
  int heads = 4;
  int mlp_ratio = 4;
  bool class_token = true;  // false: mean pooling
  bool remat = false;       // recompute each block's activations in backward (config train.remat)
  Precision precision = Precision::kFloat32;  // of the matrix products (config train.precision)
};

struct VitWorkspace : ModelWorkspace {
  using ModelWorkspace::ModelWorkspace;
  std::vector<float> patches;  // [n * grid, patch_dim]
  std::vector<float> stream;   // [n * tokens, d]
  BlockStack stack;  // what the blocks keep for backward
  std::vector<float> final_x, norm, mean_f, rstd_f, pooled, probs;
  std::vector<float> d_logits, d_pooled, d_norm, dx, d_embed;
  BlockScratch scratch;
  int64_t OwnBytes() const override {
    return stack.bytes() + scratch.bytes() +
           HeldBytes(patches, stream, final_x, norm, mean_f, rstd_f, pooled, probs, d_logits, d_pooled, d_norm, dx,
                     d_embed);
  }
};

class Vit : public Model {
 public:
  // Fails naming the field if the spec cannot make a model.
  static absl::StatusOr<std::unique_ptr<Model>> Create(const VitSpec& spec);

  const FlatLayout& layout() const override { return layout_; }
  const InputShape& input() const override { return spec_.input; }
  // Per image: the patch embedding 2 * grid * patch_dim * d, per layer and
  // token 2 * (4 d^2 + 2 d F) and 4 * tokens * d of attention, the head
  // 2 * d * classes; times 3 for training.
  int64_t TrainFlopsPerExample() const override;
  void InitRange(uint64_t seed, Range range, float* out) const override;
  int64_t WorkspaceBytes(int batch) const override;
  std::vector<Range> Layers() const override;
  std::vector<Range> GradientParts() const override;
  // Layers() downwards but the patch embedding: its backward reads no parameter.
  std::vector<Range> BackwardReads() const override {
    std::vector<Range> layers = Layers();
    return std::vector<Range>(layers.rbegin(), layers.rend() - 1);
  }
  std::unique_ptr<ModelWorkspace> NewWorkspace() const override {
    return std::make_unique<VitWorkspace>(spec_.precision);
  }

  BatchStats Forward(const float* params, const Examples& batch, ModelWorkspace* ws) const override;
  void Backward(const float* params, const Examples& batch, float grad_scale, bool accumulate, float* grads,
                ModelWorkspace* ws) const override;
  // Evaluation in chunks, to bound the attention probabilities kept.
  int eval_chunk() const override { return kEvalChunk; }
  static constexpr int kEvalChunk = 64;

 private:
  explicit Vit(const VitSpec& spec);
  // Image x [features] into its grid of patches [grid, patch_dim].
  void Patchify(const float* x, float* patches) const;

  VitSpec spec_;
  BlockShape shape_;
  int grid_ = 0;       // patches per image
  int patch_dim_ = 0;  // C * patch * patch
  int tokens_ = 0;     // grid (+ 1 with the class token)
  FlatLayout layout_;
  int embed_w_ = 0, embed_b_ = 0, cls_ = -1, pos_ = 0, norm_w_ = 0, norm_b_ = 0, head_w_ = 0, head_b_ = 0;
  std::vector<BlockTensors> blocks_;
};

}  // namespace shardline

#endif  // SHARDLINE_WORKER_MODEL_VIT_H_
