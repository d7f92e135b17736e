#include "coordinator/status_page.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status/goodput_account.h"
#include "common/encoding/text_escape.h"
#include "common/status/progress_line.h"
#include "common/status/status_report.h"

namespace shardline {
namespace {

// HTML-escaped, after control bytes are made visible (EscapeControl).
std::string Escape(const std::string& text) {
  std::string out;
  for (char c : EscapeControl(text)) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

constexpr char kStyle[] = R"css(
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;padding:12px;background:#f6f7f9;color:#1d2330}
h1{font-size:1.2em;margin:0 0 8px}
.state{display:inline-block;padding:2px 8px;border-radius:10px;color:#fff;font-size:.85em}
.running,.stopping{background:#1a7f37}.forming{background:#9a6700}.done{background:#0550ae}.failed{background:#cf222e}
.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(150px,1fr));gap:8px;margin:8px 0}
.card{background:#fff;border-radius:6px;padding:8px;box-shadow:0 1px 2px #0002}
.card b{display:block;font-size:1.2em}
.bar{height:6px;background:#d0d7de;border-radius:3px}.bar div{height:6px;background:#1a7f37;border-radius:3px}
.charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(280px,1fr));gap:8px}
svg.chart{width:100%;height:auto;background:#fff;border-radius:6px;box-shadow:0 1px 2px #0002}
svg.chart polyline{fill:none;stroke:#0969da;stroke-width:2}
svg.chart text{font-size:11px;fill:#57606a}
.wrap{overflow-x:auto}
table{border-collapse:collapse;background:#fff;width:100%;font-size:.9em}
th,td{padding:4px 8px;border-bottom:1px solid #d8dee4;text-align:right;white-space:nowrap}
th:first-child,td:first-child,.addr{text-align:left}
.slow{color:#cf222e;font-weight:bold}.error{color:#cf222e}
)css";

}  // namespace

std::string LineChartSvg(const std::string& id, const std::string& title,
                         const std::vector<std::pair<double, double>>& series) {
  constexpr double kW = 600, kH = 220, kLeft = 56, kRight = 12, kTop = 24, kBottom = 28;
  std::string svg = absl::StrFormat(
      "<svg class=\"chart\" data-series=\"%s\" viewBox=\"0 0 %.0f %.0f\" role=\"img\" aria-label=\"%s\">"
      "<text x=\"%.0f\" y=\"16\" style=\"font-size:13px;fill:#1d2330\">%s</text>",
      id, kW, kH, Escape(title), kLeft, Escape(title));
  std::vector<std::pair<double, double>> points;
  for (const auto& p : series) {
    if (std::isfinite(p.first) && std::isfinite(p.second)) points.push_back(p);
  }
  if (points.empty()) {
    absl::StrAppendFormat(&svg, "<text x=\"%.0f\" y=\"%.0f\">no data yet</text></svg>", kW / 2 - 30, kH / 2);
    return svg;
  }
  double x0 = points.front().first, x1 = x0, y0 = points.front().second, y1 = y0;
  for (const auto& [x, y] : points) {
    x0 = std::min(x0, x); x1 = std::max(x1, x);
    y0 = std::min(y0, y); y1 = std::max(y1, y);
  }
  if (x1 == x0) x1 = x0 + 1;
  if (y1 == y0) { y0 -= 0.5; y1 += 0.5; }
  auto sx = [&](double x) { return kLeft + (x - x0) / (x1 - x0) * (kW - kLeft - kRight); };
  auto sy = [&](double y) { return kTop + (y1 - y) / (y1 - y0) * (kH - kTop - kBottom); };
  absl::StrAppendFormat(&svg,
                        "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"#8c959f\"/>"
                        "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"#8c959f\"/>",
                        kLeft, kTop, kLeft, kH - kBottom, kLeft, kH - kBottom, kW - kRight, kH - kBottom);
  absl::StrAppendFormat(&svg, "<text x=\"4\" y=\"%.0f\">%.4g</text><text x=\"4\" y=\"%.0f\">%.4g</text>", kTop + 10,
                        y1, kH - kBottom, y0);
  absl::StrAppendFormat(&svg,
                        "<text x=\"%.0f\" y=\"%.0f\">step %.0f</text>"
                        "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\">step %.0f</text>",
                        kLeft, kH - 8, x0, kW - kRight, kH - 8, x1);
  std::string coords;
  for (const auto& [x, y] : points) absl::StrAppendFormat(&coords, "%s%.1f,%.1f", coords.empty() ? "" : " ", sx(x), sy(y));
  absl::StrAppend(&svg, "<polyline points=\"", coords, "\"/></svg>");
  return svg;
}

namespace {

// The cards under the bar: step, ETA, generation, workers, loss, rate, best
// eval, last checkpoint, goodput.
std::string CardsHtml(const coordinator::JobStatus& s, double percent, absl::Time now) {
  std::string html;
  auto card = [&html](const std::string& id, const std::string& label, const std::string& value) {
    absl::StrAppend(&html, "<div class=\"card\" id=\"", id, "\">", Escape(label), "<b>", Escape(value), "</b></div>");
  };
  absl::StrAppend(&html, "<div class=\"cards\">");
  card("step", "step", absl::StrFormat("%d / %d (%.1f%%)", s.global_step(), s.total_steps(), percent));
  card("eta", "ETA", FormatEta(s.eta_seconds()));
  card("generation", "generation", absl::StrCat(s.generation(), " (", s.worker_losses(), " lost)"));
  card("world", "workers", s.target_world_size() > 0 && s.world_size() != s.target_world_size()
                               ? absl::StrCat(s.world_size(), " of ", s.target_world_size(), " (elastic)")
                               : absl::StrCat(s.world_size()));
  card("loss", "train loss",
       s.has_last_train() ? absl::StrFormat("%.4f @ %d", s.last_train().loss(), s.last_train().step()) : "-");
  card("rate", "samples/s", s.has_last_train() ? absl::StrFormat("%.0f", s.last_train().samples_per_second()) : "-");
  if (s.has_best_eval() && s.best_eval().has_bits_per_byte()) {
    card("best", "best validation bits/byte",
         absl::StrFormat("%.3f @ %d", s.best_eval().bits_per_byte(), s.best_eval().step()));
  } else {
    card("best", "best eval accuracy",
         s.has_best_eval() ? absl::StrFormat("%.4f @ %d", s.best_eval().accuracy(), s.best_eval().step()) : "-");
  }
  std::string ckpt = "none";
  if (s.last_checkpoint_step() > 0) {
    ckpt = absl::StrFormat("step %d, %.0f s ago", s.last_checkpoint_step(), CheckpointAgeSeconds(s, now));
  }
  card("checkpoint", "last committed checkpoint", ckpt);
  card("goodput", "goodput", absl::StrFormat("%.1f%%", 100 * GoodputRatio(s.goodput())));
  absl::StrAppend(&html, "</div>");
  return html;
}


// The workers' table: rank, address, liveness, heartbeat, step, work, straggler score.
std::string WorkersTableHtml(const coordinator::JobStatus& s) {
  std::string html;
  absl::StrAppend(&html,
                  "<h2>workers</h2><div class=\"wrap\"><table id=\"workers\"><tr><th>rank</th><th class=\"addr\">host:port</th>"
                  "<th>alive</th><th>last heartbeat</th><th>step</th><th>own work / step</th><th>straggler</th></tr>");
  for (const coordinator::WorkerStatus& w : s.workers()) {
    const bool slow = w.straggler_score() > 0 && w.straggler_score() < 0.7;
    absl::StrAppendFormat(
        &html,
        "<tr class=\"worker\" data-rank=\"%d\"><td>%d</td><td class=\"addr\">%s</td><td>%s</td><td>%.2f s</td>"
        "<td>%d</td><td>%.2f ms</td><td%s>%s</td></tr>",
        w.rank(), w.rank(), Escape(w.address()), w.finished() ? "done" : w.alive() ? "yes" : "no",
        w.seconds_since_heartbeat(), w.steps_done(), w.busy_seconds_per_step() * 1e3, slow ? " class=\"slow\"" : "",
        w.straggler_score() > 0 ? absl::StrFormat("%.2f", w.straggler_score()) : "-");
  }
  absl::StrAppend(&html, "</table></div>");
  return html;
}

}  // namespace

std::string StatusPageHtml(const coordinator::JobStatus& s, const std::vector<metrics::MetricRecord>& train,
                           const std::vector<metrics::MetricRecord>& eval, absl::Time now,
                           const StatusPageOptions& options) {
  const std::string state = StateName(s.state());
  std::string html = absl::StrCat(
      "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">",
      options.refresh_seconds > 0 ? absl::StrFormat("<meta http-equiv=\"refresh\" content=\"%d\">", options.refresh_seconds)
                                  : "",
      "<title>shardline ", Escape(s.job_id()), ": ", state, "</title><style>", kStyle, "</style></head><body>");
  const double percent = s.total_steps() > 0 ? 100.0 * s.global_step() / s.total_steps() : 0;
  absl::StrAppendFormat(&html,
                        "<h1>shardline job <code>%s</code> <span id=\"state\" class=\"state %s\">%s</span></h1>"
                        "<div class=\"bar\"><div style=\"width:%.1f%%\"></div></div>",
                        Escape(s.job_id()), state, state, std::min(100.0, percent));
  if (!s.error().empty()) absl::StrAppend(&html, "<p class=\"error\" id=\"error\">", Escape(s.error()), "</p>");

  absl::StrAppend(&html, CardsHtml(s, percent, now));

  std::vector<std::pair<double, double>> loss, accuracy;
  for (const metrics::MetricRecord& r : train) {
    if (r.has_loss()) loss.emplace_back(r.step(), r.loss());
  }
  for (const metrics::MetricRecord& r : eval) {
    if (r.has_accuracy()) accuracy.emplace_back(r.step(), r.accuracy());
  }
  absl::StrAppend(&html, "<div class=\"charts\">", LineChartSvg("train-loss", "train loss", loss),
                  LineChartSvg("eval-accuracy", "test accuracy", accuracy), "</div>");

  absl::StrAppend(&html, WorkersTableHtml(s));
  absl::StrAppend(&html, "<h2>time</h2><div class=\"wrap\"><table id=\"goodput\">",
                  absl::StrFormat("<tr><td>goodput</td><td>%.1f s</td></tr>", s.goodput().goodput_seconds()));
  for (const char* kind : BadputKinds()) {
    auto it = s.goodput().badput_seconds().find(kind);
    absl::StrAppendFormat(&html, "<tr><td>lost: %s</td><td>%.1f s</td></tr>", kind,
                          it == s.goodput().badput_seconds().end() ? 0.0 : it->second);
  }
  absl::StrAppendFormat(&html, "<tr><td>disruptions</td><td>%d</td></tr></table></div>", s.goodput().disruptions());
  if (!s.checkpoint_note().empty()) {
    absl::StrAppend(&html, "<p id=\"checkpoint-note\">checkpoints: ", Escape(s.checkpoint_note()), "</p>");
  }
  if (s.has_outer()) absl::StrAppend(&html, "<p id=\"outer-steps\">", Escape(OuterStepLine(s.outer())), "</p>");
  if (const std::string numerics = NumericsLine(s); !numerics.empty()) {
    absl::StrAppend(&html, "<p id=\"numerics\">numerics: ", Escape(numerics), "</p>");
  }
  absl::StrAppend(&html, "<p><small>", Escape(ProgressLine(s)), "</small></p></body></html>\n");
  return html;
}

}  // namespace shardline
