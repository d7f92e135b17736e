#include "common/platform/args.h"

#include <string>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace shardline {
namespace {

// A message that came from outside (a member's fatal error) must not forge
// a log line on the operator's terminal nor reach it with escapes.
TEST(RunCommandTest, AnErrorFromOutsideIsPrintedEscapedOnOneLine) {
  Args args;
  const std::string forged =
      "boom\nE1128 08:00:00.000000 1 job.cc:1] job failed: FORGED\x1b[2J\x1b]0;title\x07";
  testing::internal::CaptureStderr();
  const int rc = RunCommand(absl::OkStatus(), args, "help", "shardline-coordinator",
                            [&](const Args&) { return absl::AbortedError(forged); });
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(rc, 1);
  EXPECT_EQ(err.find('\x1b'), std::string::npos) << err;
  EXPECT_EQ(err.find('\x07'), std::string::npos) << err;
  ASSERT_FALSE(err.empty());
  EXPECT_EQ(err.find('\n'), err.size() - 1) << "one line: " << err;
  EXPECT_NE(err.find("boom\\nE1128"), std::string::npos) << err;
  EXPECT_NE(err.find("\\x1b[2J"), std::string::npos) << err;
}

TEST(RunCommandTest, HelpAndSuccess) {
  Args args;
  args.help = true;
  testing::internal::CaptureStdout();
  EXPECT_EQ(RunCommand(absl::OkStatus(), args, "the help\n", "c", [](const Args&) { return absl::OkStatus(); }), 0);
  EXPECT_EQ(testing::internal::GetCapturedStdout(), "the help\n");
  args.help = false;
  EXPECT_EQ(RunCommand(absl::OkStatus(), args, "h", "c", [](const Args&) { return absl::OkStatus(); }), 0);
  EXPECT_EQ(RunCommand(absl::InvalidArgumentError("bad flag"), args, "h", "c",
                       [](const Args&) { return absl::OkStatus(); }),
            1);
}

}  // namespace
}  // namespace shardline
