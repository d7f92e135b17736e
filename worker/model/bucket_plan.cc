#include "worker/model/bucket_plan.h"

#include <algorithm>
#include <string_view>

namespace shardline {
namespace {

std::string_view LayerOf(const std::string& tensor) {
  return std::string_view(tensor).substr(0, tensor.find('/'));
}

}  // namespace

std::vector<Range> BucketPlan(const FlatLayout& layout, int64_t cap_floats) {
  const int64_t total = layout.total_size();
  if (total == 0) return {};
  if (cap_floats <= 0 || cap_floats >= total) return {Range{0, total}};
  // Layers as flat ranges, last first.
  std::vector<Range> layers;
  const std::vector<TensorInfo>& tensors = layout.tensors();
  for (size_t t = tensors.size(); t-- > 0;) {
    const bool same_layer = !layers.empty() && t + 1 < tensors.size() && LayerOf(tensors[t].name) == LayerOf(tensors[t + 1].name);
    if (same_layer) {
      layers.back().begin = tensors[t].offset;
    } else {
      layers.push_back(tensors[t].range());
    }
  }
  std::vector<Range> buckets;
  for (const Range& layer : layers) {
    if (!buckets.empty() && buckets.back().size() + layer.size() <= cap_floats) {
      buckets.back().begin = layer.begin;
    } else {
      buckets.push_back(layer);
    }
  }
  std::reverse(buckets.begin(), buckets.end());
  return buckets;
}

int64_t BucketCapFloats(double cap_mb) {
  return static_cast<int64_t>(cap_mb * (1 << 20) / sizeof(float));
}

}  // namespace shardline
