// The coordinator's live status page (GET /status on its metrics port): the
// facts of `shardline status` plus loss and accuracy curves drawn as inline
// SVG. One self-contained HTML document - no scripts, fonts or anything
// fetched from elsewhere - that reloads itself every `refresh_seconds`
// (<meta http-equiv="refresh">) and fits a phone's width.
//
// Stable hooks for tests and scrapers: table#workers has one tr.worker per
// rank (data-rank); each curve is an svg.chart (data-series="train-loss",
// "eval-accuracy") holding one polyline whose points are its data.
//
//   std::string html = StatusPageHtml(job_status, history.Train(), history.Eval(), WallNow());
#ifndef SHARDLINE_COORDINATOR_STATUS_PAGE_H_
#define SHARDLINE_COORDINATOR_STATUS_PAGE_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "proto/coordinator.pb.h"
#include "proto/metrics.pb.h"

namespace shardline {

struct StatusPageOptions {
  int refresh_seconds = 2;
};

// `series` as an SVG line chart: x and y axes scaled to the data's range,
// labelled with their ends. Empty series: the chart says "no data yet".
std::string LineChartSvg(const std::string& id, const std::string& title,
                         const std::vector<std::pair<double, double>>& series);

std::string StatusPageHtml(const coordinator::JobStatus& status, const std::vector<metrics::MetricRecord>& train,
                           const std::vector<metrics::MetricRecord>& eval, absl::Time now,
                           const StatusPageOptions& options = {});

}  // namespace shardline

#endif  // SHARDLINE_COORDINATOR_STATUS_PAGE_H_
