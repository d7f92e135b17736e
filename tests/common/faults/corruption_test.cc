#include "common/faults/corruption.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace shardline {
namespace {

TEST(CorruptionSpecTest, ParsesEveryFieldAndTheOptionalMarker) {
  absl::StatusOr<CorruptionSpec> s = ParseCorruption("2:40:gathered:30");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->rank, 2);
  EXPECT_EQ(s->step, 40);
  EXPECT_EQ(s->site, CorruptSite::kGathered);
  EXPECT_EQ(s->bit, 30);
  EXPECT_EQ(s->marker, "");
  s = ParseCorruption("0:7:moment:0:/tmp/x:y");  // the marker may hold a colon
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->site, CorruptSite::kMoment);
  EXPECT_EQ(s->marker, "/tmp/x:y");
  s = ParseCorruption("3:*:gradient:30");  // every step: a core that keeps computing wrong
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->step, kEveryStep);
  for (const char* site : {"gathered", "gradient", "reduced", "param", "moment", "outer"}) {
    s = ParseCorruption(absl::StrCat("1:1:", site, ":5"));
    ASSERT_TRUE(s.ok()) << site;
    EXPECT_EQ(CorruptSiteName(s->site), site);
  }
}

TEST(CorruptionSpecTest, EveryBadFieldIsRefusedNamingTheVariableAndTheField) {
  const std::pair<const char*, const char*> cases[] = {
      {"1:2:gathered", "too few fields"},
      {"x:2:gathered:3", "the rank"},
      {"-1:2:gathered:3", "the rank"},
      {"1:two:gathered:3", "the step"},
      {"1:2:disk:3", "no site is called \"disk\""},
      {"1:2:param:32", "the bit"},
      {"1:2:param:-1", "the bit"},
      {"1:2:param:3:", "the marker file is empty"},
  };
  for (const auto& [text, why] : cases) {
    const absl::StatusOr<CorruptionSpec> s = ParseCorruption(text);
    ASSERT_FALSE(s.ok()) << text;
    EXPECT_TRUE(absl::IsInvalidArgument(s.status())) << s.status();
    EXPECT_TRUE(absl::StrContains(s.status().message(), "SHARDLINE_CORRUPT")) << s.status();
    EXPECT_TRUE(absl::StrContains(s.status().message(), why)) << s.status();
  }
}

TEST(CorruptionSpecTest, FlipsExactlyTheBitAsked) {
  float v = 1.0f;  // 0x3f800000
  FlipFloatBit(&v, 31);
  EXPECT_EQ(v, -1.0f);
  FlipFloatBit(&v, 31);
  FlipFloatBit(&v, 23);  // the exponent's lowest bit: 2^0 -> 2^-1
  EXPECT_EQ(v, 0.5f);
}

TEST(CorruptionSpecTest, UnsetNeverFires) {
  // The test runs without SHARDLINE_CORRUPT (ctest does not set it).
  ASSERT_EQ(std::getenv("SHARDLINE_CORRUPT"), nullptr);
  float v = 1.0f;
  EXPECT_FALSE(MaybeCorrupt(CorruptSite::kParam, 0, 0, &v, 0));
  EXPECT_EQ(v, 1.0f);
}

}  // namespace
}  // namespace shardline
