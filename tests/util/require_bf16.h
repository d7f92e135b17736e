// For tests of train.precision BF16: they need a CPU with AVX512_BF16.
//
//   TEST(X, Y) {
//     SHARDLINE_REQUIRE_BF16();
//     ...
//
// Skips the test, saying why, on a CPU without it; .ci/run sets
// SHARDLINE_REQUIRE_BF16=1 on a CPU that advertises AVX512_BF16, where a
// missing feature fails the test instead, so a broken detection never
// skips the BF16 tests silently there.
#ifndef SHARDLINE_TESTS_UTIL_REQUIRE_BF16_H_
#define SHARDLINE_TESTS_UTIL_REQUIRE_BF16_H_

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "absl/status/status.h"
#include "worker/model/gemm.h"

#define SHARDLINE_REQUIRE_BF16()                                                              \
  do {                                                                                        \
    const absl::Status bf16_ok = ::shardline::CheckPrecisionSupported(                        \
        ::shardline::Precision::kBfloat16);                                                   \
    if (!bf16_ok.ok()) {                                                                      \
      const char* require = std::getenv("SHARDLINE_REQUIRE_BF16");                            \
      if (require != nullptr && std::strcmp(require, "1") == 0) FAIL() << bf16_ok;            \
      GTEST_SKIP() << bf16_ok;                                                                \
    }                                                                                         \
  } while (false)

#endif  // SHARDLINE_TESTS_UTIL_REQUIRE_BF16_H_
