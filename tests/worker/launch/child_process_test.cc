// What `shardline launch` passes on from a child: every line escaped, in its
// log and on launch's own output.
#include "worker/launch/child_process.h"

#include <sys/wait.h>

#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "common/platform/env.h"

namespace shardline {
namespace {

TEST(ChildProcessTest, ARawLineFromAChildIsEscapedInItsLogAndOnLaunchsOutput) {
  const std::string log = ::testing::TempDir() + "/child_process_test.log";
  std::remove(log.c_str());
  testing::internal::CaptureStderr();
  {
    ChildProcess child(Env::Default(), "worker 0",
                       {"/bin/sh", "-c", "printf 'E1128 forged\\033[2J\\033]0;title\\007\\n'"}, log);
    ASSERT_TRUE(child.Start().ok());
    int status = 0;
    ASSERT_EQ(waitpid(child.pid(), &status, 0), child.pid());
    child.Exited();
  }  // joins the pump
  const std::string out = testing::internal::GetCapturedStderr();
  const std::string logged = *Env::Default()->ReadFile(log, kMaxSmallFileBytes);
  for (const std::string& text : {out, logged}) {
    EXPECT_EQ(text.find('\x1b'), std::string::npos) << text;
    EXPECT_EQ(text.find('\x07'), std::string::npos) << text;
    EXPECT_TRUE(absl::StrContains(text, "E1128 forged\\x1b[2J")) << text;
  }
  EXPECT_TRUE(absl::StrContains(out, "[worker 0] E1128 forged")) << out;
  std::remove(log.c_str());
}

}  // namespace
}  // namespace shardline
