// Arithmetic on sizes read from files and peers: a product or sum that
// would not fit is nullopt, never a wrapped value that a later size check
// could mistake for a small one (a token manifest's tokens x token_bytes
// once wrapped to 0 and passed as an empty shard).
//
//   std::optional<int64_t> bytes = CheckedMul(shard.tokens, token_bytes);
//   if (!bytes.has_value() || *bytes > kMaxTokenShardBytes) return Bad(...);
#ifndef SHARDLINE_COMMON_ENCODING_CHECKED_MATH_H_
#define SHARDLINE_COMMON_ENCODING_CHECKED_MATH_H_

#include <optional>
#include <type_traits>

namespace shardline {

template <typename T>
std::optional<T> CheckedMul(T a, T b) {
  static_assert(std::is_integral_v<T>);
  T out;
  if (__builtin_mul_overflow(a, b, &out)) return std::nullopt;
  return out;
}

template <typename T>
std::optional<T> CheckedAdd(T a, T b) {
  static_assert(std::is_integral_v<T>);
  T out;
  if (__builtin_add_overflow(a, b, &out)) return std::nullopt;
  return out;
}

}  // namespace shardline

#endif  // SHARDLINE_COMMON_ENCODING_CHECKED_MATH_H_
