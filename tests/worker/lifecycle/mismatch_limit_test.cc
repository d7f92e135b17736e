#include "worker/lifecycle/mismatch_limit.h"

#include <gtest/gtest.h>

#include "absl/strings/match.h"

namespace shardline {
namespace {

TEST(MismatchLimitTest, TheThirdTimeIsFatalNamingTheStepsAndTheLastReason) {
  const absl::Status last = absl::InternalError("replay audit of step 99 names rank 1: why");
  EXPECT_TRUE(MismatchLimit({0}, true, last).ok());
  EXPECT_TRUE(MismatchLimit({0, 50}, true, last).ok());
  absl::Status s = MismatchLimit({0, 50, 50}, true, last);
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;  // fatal: the worker leaves, the job hears it
  EXPECT_TRUE(absl::StrContains(s.message(), "this worker was named 3 times")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "generations starting at steps 0, 50, 50")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "the last: replay audit of step 99 names rank 1: why")) << s;
  s = MismatchLimit({0, 0, 0}, false, last);
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "nobody could be named, 3 times")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "shardline numerics")) << s;
}

}  // namespace
}  // namespace shardline
