// The R data reader on bytes made here (each failure it must name) and on
// the real r-cran-janeaustenr file.
#include "worker/data/rdata.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "common/platform/env.h"
#include "worker/data/austen.h"
#include "tests/worker/data/rdata_writer.h"

namespace shardline {
namespace {

TEST(RdataTest, ReadsEveryCharacterVectorInFileOrderWithNaCounted) {
  const std::string rdb = Record(SerializeStrings({"EMMA", "", "By Jane Austen"})) +
                          Record(SerializeStrings({"Persuasion", nullptr, "x"}));
  absl::StatusOr<std::vector<RStrings>> got = ReadRdataStrings(rdb, "t.rdb");
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 2u);
  EXPECT_EQ((*got)[0].strings, (std::vector<std::string>{"EMMA", "", "By Jane Austen"}));
  EXPECT_EQ((*got)[0].na, 0);
  EXPECT_EQ((*got)[1].strings, (std::vector<std::string>{"Persuasion", "", "x"}));
  EXPECT_EQ((*got)[1].na, 1);
}

TEST(RdataTest, EveryBadFileGetsAnErrorNamingTheFileAndTheRecord) {
  const std::string good = Record(SerializeStrings({"a", "b"}));
  struct Bad {
    const char* name;
    std::string bytes;
    const char* says;
  };
  std::string cut_element = SerializeStrings({"abcdef"});
  cut_element.resize(cut_element.size() - 3);
  std::string corrupt = good + good;
  corrupt[good.size() + 8] ^= 0x55;
  const std::vector<Bad> cases = {
      {"empty", "", "no records"},
      {"short length", std::string("\0\0", 2), "cut short in its length"},
      {"an integer vector", Record(SerializeStrings({"a"}, /*type=*/13)), "not a character vector"},
      {"a stated length past the limit", Record(SerializeStrings({"a"}), 1 << 30), "at most"},
      {"a stated length too short", Record(SerializeStrings({"a", "b"}), 10), "more than its stated"},
      {"a stated length too long", Record(SerializeStrings({"a"}), 200), "not its stated"},
      {"a corrupt stream", corrupt, "record 1"},
      {"a stream cut short", good.substr(0, good.size() - 4), "corrupt or cut short"},
      {"an element cut short", Record(cut_element), "cut short in element 0"},
      {"not XDR", Record("A\n" + SerializeStrings({"a"}).substr(2)), "XDR"},
  };
  for (const Bad& c : cases) {
    absl::StatusOr<std::vector<RStrings>> got = ReadRdataStrings(c.bytes, "bad.rdb");
    ASSERT_FALSE(got.ok()) << c.name;
    EXPECT_TRUE(absl::StartsWith(got.status().message(), "bad.rdb")) << c.name << ": " << got.status();
    EXPECT_TRUE(absl::StrContains(got.status().message(), c.says)) << c.name << ": " << got.status();
  }
}

TEST(AustenTest, TheSixNovelsFromTheDebianPackageSplitIntoTrainAndPersuasion) {
  Env* env = Env::Default();
  absl::StatusOr<std::string> rdb = FindAustenRdata(env);
  ASSERT_TRUE(rdb.ok()) << rdb.status();  // deploy/install-deps.sh unpacks it
  absl::StatusOr<AustenText> text = ReadAusten(env, *rdb);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(text->train.size(), 3558175u);
  EXPECT_EQ(text->val.size(), 466854u);
  EXPECT_TRUE(absl::StartsWith(text->train, "SENSE AND SENSIBILITY\n"));
  EXPECT_TRUE(absl::StrContains(text->train, "\nPRIDE AND PREJUDICE\n"));
  EXPECT_TRUE(absl::StartsWith(text->val, "Persuasion\n"));
  EXPECT_TRUE(absl::StrContains(text->train, "It is a truth universally acknowledged"));
}

}  // namespace
}  // namespace shardline
