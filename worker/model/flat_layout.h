// A flat parameter layout: named tensors with shapes, packed back to back in
// one contiguous float buffer. Parameters, gradients and every optimizer
// state buffer share one layout, so any of them can be cut into N shards
// (common/job/shard.h) and a shard maps back to (tensor, element) pairs.
//
//   FlatLayout layout;
//   layout.Add("layer0/w", {784, 256});
//   layout.Add("layer0/b", {256});
//   std::vector<float> params(layout.total_size());
#ifndef SHARDLINE_WORKER_MODEL_FLAT_LAYOUT_H_
#define SHARDLINE_WORKER_MODEL_FLAT_LAYOUT_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/job/shard.h"

namespace shardline {

struct TensorInfo {
  std::string name;
  std::vector<int64_t> shape;
  int64_t offset = 0;  // first element in the flat buffer
  int64_t size = 0;    // product of shape
  Range range() const { return Range{offset, offset + size}; }
};

class FlatLayout {
 public:
  // Appends a tensor after the last one and returns its index.
  int Add(std::string name, std::vector<int64_t> shape);

  int64_t total_size() const { return total_size_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo& tensor(int index) const { return tensors_[static_cast<size_t>(index)]; }

  // Calls fn(tensor index, overlap) for every tensor overlapping `range`, in
  // order; `overlap` is the flat range of the intersection.
  void ForEachOverlap(Range range, const std::function<void(int, Range)>& fn) const;

 private:
  std::vector<TensorInfo> tensors_;
  int64_t total_size_ = 0;
};

}  // namespace shardline

#endif  // SHARDLINE_WORKER_MODEL_FLAT_LAYOUT_H_
