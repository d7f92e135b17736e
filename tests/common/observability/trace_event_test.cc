#include "common/observability/trace_event.h"

#include <gtest/gtest.h>

#include "nlohmann/json.hpp"

namespace shardline {
namespace {

using json = nlohmann::json;

TEST(TraceEventTest, ACompleteEventAndAnInstantAreChromeTraceEvents) {
  TraceEvent span;
  span.name = "forward";
  span.ts_micros = 1000;
  span.dur_micros = 250;
  span.pid = 3;
  span.args_json = "{\"step\":7,\"generation\":2}";
  const json x = json::parse(TraceEventLine(span));
  EXPECT_EQ(x["name"], "forward");
  EXPECT_EQ(x["ph"], "X");
  EXPECT_EQ(x["ts"], 1000);
  EXPECT_EQ(x["dur"], 250);
  EXPECT_EQ(x["pid"], 3);
  EXPECT_EQ(x["tid"], 0);
  EXPECT_EQ(x["args"]["step"], 7);

  TraceEvent instant;
  instant.kind = TraceEvent::kInstant;
  instant.name = "world \"broke\"\n";  // escaped, so the line stays one JSON object
  instant.ts_micros = 5;
  const std::string line = TraceEventLine(instant);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  const json i = json::parse(line);
  EXPECT_EQ(i["name"], "world \"broke\"\n");
  EXPECT_EQ(i["ph"], "i");
  EXPECT_EQ(i["s"], "p");
  EXPECT_FALSE(i.contains("dur"));
  EXPECT_TRUE(i["args"].is_object());
}

TEST(TraceEventTest, RankFileNamesRoundTrip) {
  int rank = -1;
  EXPECT_TRUE(ParseRankTraceFile(RankTraceFile(12), &rank));
  EXPECT_EQ(rank, 12);
  EXPECT_FALSE(ParseRankTraceFile(kCoordinatorTraceFile, &rank));
  EXPECT_FALSE(ParseRankTraceFile(kClockOffsetsFile, &rank));
  EXPECT_FALSE(ParseRankTraceFile("rank-.jsonl", &rank));
  EXPECT_FALSE(ParseRankTraceFile("rank-x.jsonl", &rank));
}

}  // namespace
}  // namespace shardline
