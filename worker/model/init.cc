#include "worker/model/init.h"

#include <algorithm>
#include <cmath>

#include "common/job/rng.h"

namespace shardline {

void InitHeUniform(const FlatLayout& layout, uint64_t seed, Range range, float* out,
                   const std::function<int64_t(const TensorInfo&)>& fan_in) {
  layout.ForEachOverlap(range, [&](int t, Range overlap) {
    const TensorInfo& info = layout.tensor(t);
    float* dst = out + (overlap.begin - range.begin);
    if (info.shape.size() == 1) {
      std::fill(dst, dst + overlap.size(), 0.0f);
      return;
    }
    const float bound = std::sqrt(6.0f / static_cast<float>(fan_in(info)));
    const RandomStream rng(seed, Purpose::kInit, static_cast<uint64_t>(t), 0);
    for (int64_t i = overlap.begin; i < overlap.end; ++i) {
      const float u = rng.Uniform(static_cast<uint64_t>(i - info.offset));
      dst[i - overlap.begin] = (2.0f * u - 1.0f) * bound;
    }
  });
}

void InitByTensor(const FlatLayout& layout, uint64_t seed, Range range, float* out,
                  const std::function<TensorInit(const TensorInfo&)>& rule) {
  layout.ForEachOverlap(range, [&](int t, Range overlap) {
    const TensorInfo& info = layout.tensor(t);
    float* dst = out + (overlap.begin - range.begin);
    const TensorInit how = rule(info);
    if (how.kind != TensorInit::kNormal) {
      std::fill(dst, dst + overlap.size(), how.kind == TensorInit::kOne ? 1.0f : 0.0f);
      return;
    }
    const RandomStream rng(seed, Purpose::kInit, static_cast<uint64_t>(t), 0);
    constexpr double kTwoPi = 6.283185307179586;
    for (int64_t i = overlap.begin; i < overlap.end; ++i) {
      const uint64_t e = static_cast<uint64_t>(i - info.offset);
      const double u1 = 1.0 - rng.Uniform(2 * e);  // (0, 1]: the log is finite
      const double u2 = rng.Uniform(2 * e + 1);
      dst[i - overlap.begin] = static_cast<float>(how.std * std::sqrt(-2.0 * std::log(u1)) * std::cos(kTwoPi * u2));
    }
  });
}

}  // namespace shardline
