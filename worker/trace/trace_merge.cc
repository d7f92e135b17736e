#include "worker/trace/trace_merge.h"

#include <algorithm>
#include <map>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/observability/trace_event.h"
#include "common/platform/status_macros.h"
#include "nlohmann/json.hpp"

namespace shardline {
namespace {

using nlohmann::json;

// The JSON objects of a .jsonl file. A last line without its newline is a
// write a killed process did not finish: skipped and counted.
absl::Status ReadLines(Env* env, const std::string& path, std::vector<json>* out, int* torn) {
  ASSIGN_OR_RETURN(std::string text, env->ReadFile(path, kMaxDataFileBytes));
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  const bool complete = text.empty() || text.back() == '\n';
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].empty()) continue;
    json j = json::parse(lines[i].begin(), lines[i].end(), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) {
      if (i + 1 == lines.size() && !complete) {
        ++*torn;
        continue;
      }
      return absl::DataLossError(absl::StrCat(path, ":", i + 1, ": not a JSON object"));
    }
    out->push_back(std::move(j));
  }
  return absl::OkStatus();
}

json ProcessName(int pid, const std::string& name) {
  return json{{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"tid", 0}, {"args", {{"name", name}}}};
}

json SortIndex(int pid) {
  return json{{"name", "process_sort_index"}, {"ph", "M"}, {"pid", pid}, {"tid", 0}, {"args", {{"sort_index", pid}}}};
}

}  // namespace

absl::StatusOr<std::string> MergeTraces(Env* env, const std::string& dir) {
  if (!env->FileExists(dir)) {
    return absl::NotFoundError(absl::StrCat(dir, " does not exist: set train.trace_steps in the job's config"));
  }
  ASSIGN_OR_RETURN(std::vector<std::string> names, env->GetChildren(dir));
  std::sort(names.begin(), names.end());
  // (generation, rank) -> offset of the rank's clock from the coordinator's.
  std::map<std::pair<int64_t, int>, int64_t> offsets;
  int torn = 0;
  if (env->FileExists(dir + "/" + kClockOffsetsFile)) {
    std::vector<json> lines;
    RETURN_IF_ERROR(ReadLines(env, dir + "/" + kClockOffsetsFile, &lines, &torn));
    for (const json& o : lines) {
      if (!o.contains("generation") || !o.contains("rank") || !o.contains("offset_us")) {
        return absl::DataLossError(absl::StrCat(dir, "/", kClockOffsetsFile, ": a line lacks generation, rank or offset_us"));
      }
      offsets[{o["generation"].get<int64_t>(), o["rank"].get<int>()}] = o["offset_us"].get<int64_t>();
    }
  }
  std::vector<json> events;
  std::vector<int> ranks;
  for (const std::string& name : names) {
    int rank = 0;
    if (!ParseRankTraceFile(name, &rank)) continue;
    std::vector<json> lines;
    RETURN_IF_ERROR(ReadLines(env, dir + "/" + name, &lines, &torn));
    for (json& e : lines) {
      if (!e.contains("ts") || !e.contains("args") || !e["args"].contains("generation")) {
        return absl::DataLossError(absl::StrCat(dir, "/", name, ": an event without ts or args.generation"));
      }
      auto it = offsets.find({e["args"]["generation"].get<int64_t>(), rank});
      if (it != offsets.end()) e["ts"] = e["ts"].get<int64_t>() - it->second;
      e["pid"] = rank + 1;
      events.push_back(std::move(e));
    }
    ranks.push_back(rank);
  }
  if (ranks.empty()) {
    return absl::NotFoundError(absl::StrCat("no rank-<r>.jsonl traces in ", dir,
                                            " (did the job reach a step listed in train.trace_steps?)"));
  }
  if (env->FileExists(dir + "/" + kCoordinatorTraceFile)) {
    std::vector<json> lines;
    RETURN_IF_ERROR(ReadLines(env, dir + "/" + kCoordinatorTraceFile, &lines, &torn));
    for (json& e : lines) events.push_back(std::move(e));
  }
  std::stable_sort(events.begin(), events.end(), [](const json& a, const json& b) {
    // Longer first at the same start, so a parent precedes its children.
    const int64_t ta = a.value("ts", int64_t{0}), tb = b.value("ts", int64_t{0});
    if (ta != tb) return ta < tb;
    return a.value("dur", int64_t{0}) > b.value("dur", int64_t{0});
  });
  json out = json::object();
  json& list = out["traceEvents"] = json::array();
  list.push_back(ProcessName(0, "coordinator"));
  list.push_back(SortIndex(0));
  for (int r : ranks) {
    list.push_back(ProcessName(r + 1, absl::StrCat("rank ", r)));
    list.push_back(SortIndex(r + 1));
  }
  for (json& e : events) list.push_back(std::move(e));
  out["displayTimeUnit"] = "ms";
  out["otherData"] = {{"clock", "the coordinator's wall clock, microseconds since the Unix epoch"},
                      {"torn_lines_skipped", torn}};
  return out.dump();
}

}  // namespace shardline
