// For tests of train.precision BF16. Every CPU runs them: one with
// bfloat16 dot products in oneDNN's kernel, any other in the widened one
// (gemm.h). Skips only where CheckPrecisionSupported refuses BF16 (a bad
// SHARDLINE_BF16_KERNEL), saying why; with SHARDLINE_REQUIRE_BF16=1 (.ci/run
// sets it) that fails the test instead, so nothing skips silently.
//
//   TEST(X, Y) {
//     SHARDLINE_REQUIRE_BF16();
//     ...
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
