#include "common/encoding/text_escape.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "common/platform/logging.h"

namespace shardline {
namespace {

TEST(TextEscapeTest, ControlBytesBecomeVisible) {
  EXPECT_EQ(EscapeControl("plain host:7000"), "plain host:7000");
  EXPECT_EQ(EscapeControl("a\nE1126 job failed"), "a\\nE1126 job failed");
  EXPECT_EQ(EscapeControl("\x1b[2J\x1b]0;pwned\x07"), "\\x1b[2J\\x1b]0;pwned\\x07");
  EXPECT_EQ(EscapeControl("tab\there\r"), "tab\\there\\r");
  EXPECT_EQ(EscapeControl(std::string("nul\0x", 5)), "nul\\x00x");
  EXPECT_EQ(EscapeControl("\x7f"), "\\x7f");
  EXPECT_EQ(EscapeControl("\xc2\x9b" "31m"), "\\u009b31m");  // C1 CSI in UTF-8
  EXPECT_EQ(EscapeControl("caf\xc3\xa9 \xc2\xa0"), "caf\xc3\xa9 \xc2\xa0");  // other UTF-8 stays
}

TEST(TextEscapeTest, LongTextIsCutAndSaysHowMuch) {
  EXPECT_EQ(EscapeControl(std::string(10, 'a'), 4), "aaaa...[6 more bytes]");
  EXPECT_EQ(EscapeControl(std::string(8 << 20, 'x')).size(), kMaxPrintedTextBytes + 23);
}

TEST(TextEscapeTest, EveryLogLineIsOneLineWithoutControlBytes) {
  ::testing::internal::CaptureStderr();
  SLOG(WARNING) << "refused " << "127.0.0.1:1\nE1126 23:00:00.000000 job.cc:1] job failed\x1b[2J";
  const std::string out = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  EXPECT_EQ(out.find('\x1b'), std::string::npos) << out;
  EXPECT_NE(out.find("refused 127.0.0.1:1\\nE1126"), std::string::npos) << out;
}

}  // namespace
}  // namespace shardline
