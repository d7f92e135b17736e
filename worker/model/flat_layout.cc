#include "worker/model/flat_layout.h"

#include <algorithm>

namespace shardline {

int FlatLayout::Add(std::string name, std::vector<int64_t> shape) {
  TensorInfo t;
  t.name = std::move(name);
  t.shape = std::move(shape);
  t.size = 1;
  for (int64_t d : t.shape) t.size *= d;
  t.offset = total_size_;
  total_size_ += t.size;
  tensors_.push_back(std::move(t));
  return static_cast<int>(tensors_.size()) - 1;
}

void FlatLayout::ForEachOverlap(Range range,
                                const std::function<void(int, Range)>& fn) const {
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const Range t = tensors_[i].range();
    const Range overlap{std::max(t.begin, range.begin), std::min(t.end, range.end)};
    if (overlap.begin < overlap.end) fn(static_cast<int>(i), overlap);
  }
}

}  // namespace shardline
