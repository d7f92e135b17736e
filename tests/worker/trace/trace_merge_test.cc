#include "worker/trace/trace_merge.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "absl/strings/match.h"
#include "nlohmann/json.hpp"
#include "worker/trace/trace_writer.h"

namespace shardline {
namespace {

std::string FreshDir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/trace_merge_" + name;
  std::system(("rm -rf '" + dir + "' && mkdir -p '" + dir + "'").c_str());
  return dir;
}

TEST(TraceMergeTest, RanksGetTheirOwnTrackOnTheCoordinatorsClock) {
  const std::string dir = FreshDir("clock");
  for (int rank = 0; rank < 2; ++rank) {
    auto w = TraceWriter::Open(Env::Default(), dir, rank, /*generation=*/3);
    ASSERT_TRUE(w.ok());
    // Rank 1's clock runs 5000 us ahead.
    const int64_t skew = rank == 1 ? 5000 : 0;
    ASSERT_TRUE((*w)->Write(7, {PhaseSpan{"step", 1000 + skew, 2000 + skew}}).ok());
  }
  std::ofstream(dir + "/clock_offsets.jsonl") << "{\"generation\":3,\"rank\":1,\"offset_us\":9999}\n"
                                                 "{\"generation\":3,\"rank\":1,\"offset_us\":5000}\n";
  std::ofstream(dir + "/coordinator.jsonl") << "{\"name\":\"world formed\",\"ph\":\"i\",\"ts\":900,\"pid\":0,\"tid\":0}\n";
  auto merged = MergeTraces(Env::Default(), dir);
  ASSERT_TRUE(merged.ok()) << merged.status();
  const nlohmann::json doc = nlohmann::json::parse(*merged);
  std::map<int, int64_t> step_ts;
  for (const auto& e : doc["traceEvents"]) {
    if (e["name"] == "step") step_ts[e["pid"].get<int>()] = e["ts"].get<int64_t>();
  }
  EXPECT_EQ(step_ts, (std::map<int, int64_t>{{1, 1000}, {2, 1000}}));  // the last estimate wins
  EXPECT_EQ(doc["traceEvents"][6]["name"], "world formed");  // after 3 tracks x 2 metadata events; sorted by time
}

TEST(TraceMergeTest, ATornLastLineIsSkippedAndAnyOtherBadLineNamed) {
  const std::string dir = FreshDir("torn");
  std::ofstream(dir + "/rank-0.jsonl")
      << "{\"name\":\"step\",\"ph\":\"X\",\"ts\":1,\"dur\":1,\"pid\":0,\"tid\":0,\"args\":{\"step\":1,\"generation\":1}}\n"
         "{\"name\":\"st";
  auto merged = MergeTraces(Env::Default(), dir);
  ASSERT_TRUE(merged.ok()) << merged.status();
  EXPECT_EQ(nlohmann::json::parse(*merged)["otherData"]["torn_lines_skipped"], 1);
  std::ofstream(dir + "/rank-1.jsonl") << "garbage\n{}\n";
  merged = MergeTraces(Env::Default(), dir);
  EXPECT_EQ(merged.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(absl::StrContains(merged.status().message(), "rank-1.jsonl:1")) << merged.status();
}

TEST(TraceMergeTest, NoTracesIsNotFoundNamingTheDirectory) {
  const std::string dir = FreshDir("none");
  auto merged = MergeTraces(Env::Default(), dir);
  EXPECT_EQ(merged.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(merged.status().message(), dir));
}

}  // namespace
}  // namespace shardline
