// The per-run summary of `mrct sim run --summary DIR`: summary.md, the run's JSON and SVG plots,
// made from the JSON text alone, so every plotted point is a value the JSON holds.
#include <sys/stat.h>
#include <unistd.h>

#include <dirent.h>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "reference-impl/simrun/simrun.h"
#include "reference-impl/svgplot/svgplot.h"

namespace mrc::simrun {

namespace {

using nlohmann::ordered_json;
namespace svg = mrc::svgplot;

// Plots hold at most this many time bins; longer series merge consecutive bins (bytes and
// counts summed, queue samples by their maximum), so a long run does not make megabyte SVGs.
constexpr size_t kMaxPlotBins = 1000;

std::string fmt(double v, const char* f = "%.3f") {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

std::string value_text(const ordered_json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "on" : "off";
  if (v.is_array()) {
    if (v.empty()) return "none";
    std::string s;
    for (const auto& e : v) s += (s.empty() ? "" : ", ") + value_text(e);
    return s;
  }
  if (v.is_number_float()) return svg::format_value(v.get<double>());
  if (v.is_null()) return "-";
  return v.dump();
}

// o[key], or null when o is not an object or has no such key (const operator[] may not be used
// for a missing key).
const ordered_json& get(const ordered_json& o, const char* key) {
  static const ordered_json kNull;
  if (!o.is_object()) return kNull;
  const auto it = o.find(key);
  return it == o.end() ? kNull : *it;
}

double num(const ordered_json& v) {
  return v.is_number() ? v.get<double>() : 0.0;
}

std::vector<uint64_t> u64s(const ordered_json& a) {
  std::vector<uint64_t> out;
  if (!a.is_array()) return out;
  for (const auto& e : a) out.push_back(e.is_number_unsigned() ? e.get<uint64_t>() : 0);
  return out;
}

// Merges every `f` consecutive bins.
std::vector<uint64_t> merge(const std::vector<uint64_t>& v, size_t f, bool by_max) {
  std::vector<uint64_t> out((v.size() + f - 1) / f, 0);
  for (size_t i = 0; i < v.size(); ++i)
    out[i / f] = by_max ? std::max(out[i / f], v[i]) : out[i / f] + v[i];
  return out;
}

svg::Series time_series(const std::string& name, const std::vector<uint64_t>& v, double bin_us,
                        double scale) {
  svg::Series s;
  s.name = name;
  for (size_t k = 0; k < v.size(); ++k) {
    s.x.push_back(static_cast<double>(k) * bin_us);
    s.y.push_back(static_cast<double>(v[k]) * scale);
  }
  return s;
}

}  // namespace

namespace {
std::vector<SummaryFile> make_summary(const std::string& result_json_text,
                                      const std::string& workload, std::string* error) {
  ordered_json j = ordered_json::parse(result_json_text, nullptr, false);
  if (j.is_discarded() || !j.contains("summary") || !j.contains("flows")) {
    *error = "summary: the result is not mrct sim JSON";
    return {};
  }
  const ordered_json& ts = get(j, "timeseries");
  if (!get(ts, "bin_ns").is_number_unsigned() || get(ts, "bin_ns").get<uint64_t>() == 0) {
    *error = "summary: the result has no time series (run with --timeseries-us)";
    return {};
  }
  const ordered_json& sum = get(j, "summary");
  std::vector<SummaryFile> files;

  // FCT CDF and slowdown percentiles over the flows that completed.
  std::vector<double> fct_us, slow;
  for (const auto& f : get(j, "flows")) {
    if (!f.is_object() || !f.value("done", false)) continue;
    fct_us.push_back(static_cast<double>(f.value("fct_ns", uint64_t{0})) / 1e3);
    slow.push_back(f.value("slowdown", 0.0));
  }
  std::sort(fct_us.begin(), fct_us.end());
  std::sort(slow.begin(), slow.end());
  {
    svg::LinePlot p;
    p.title = "Flow completion times (" + std::to_string(fct_us.size()) + " flows completed)";
    p.x_label = "FCT (us)";
    p.y_label = "fraction of completed flows";
    p.style = svg::Style::kStep;
    svg::Series s;
    s.name = "CDF";
    for (size_t i = 0; i < fct_us.size(); ++i) {
      s.x.push_back(fct_us[i]);
      s.y.push_back(static_cast<double>(i + 1) / static_cast<double>(fct_us.size()));
    }
    p.series.push_back(std::move(s));
    files.push_back({"fct_cdf.svg", svg::line_plot(p)});
  }
  {
    svg::LinePlot p;
    p.title = "FCT slowdown (FCT / ideal FCT) by percentile";
    p.x_label = "percentile of completed flows";
    p.y_label = "slowdown";
    p.style = svg::Style::kStep;
    svg::Series s;
    s.name = "slowdown";
    for (size_t i = 0; i < slow.size(); ++i) {
      s.x.push_back(100.0 * static_cast<double>(i + 1) / static_cast<double>(slow.size()));
      s.y.push_back(slow[i]);
    }
    p.series.push_back(std::move(s));
    files.push_back({"slowdown.svg", svg::line_plot(p)});
  }

  // Time series, bins merged down to at most kMaxPlotBins.
  const uint64_t bin_ns = get(ts, "bin_ns").get<uint64_t>();
  const std::vector<uint64_t> bytes = u64s(get(ts, "bytes"));
  const size_t f = std::max<size_t>(1, (bytes.size() + kMaxPlotBins - 1) / kMaxPlotBins);
  const double plot_bin_us = static_cast<double>(bin_ns * f) / 1e3;
  const double gbps = 8.0 / static_cast<double>(bin_ns * f);  // bytes per plot bin -> Gb/s
  {
    svg::LinePlot p;
    p.title = "Goodput: bytes placed at the destinations";
    p.x_label = "time (us), bins of " + svg::format_value(plot_bin_us) + " us";
    p.y_label = "Gb/s";
    p.series.push_back(time_series("all planes", merge(bytes, f, false), plot_bin_us, gbps));
    size_t plane = 1;
    for (const auto& pb : get(ts, "plane_bytes"))
      p.series.push_back(time_series("plane " + std::to_string(plane++), merge(u64s(pb), f, false),
                                     plot_bin_us, gbps));
    files.push_back({"goodput.svg", svg::line_plot(p)});
  }
  {
    svg::LinePlot p;
    p.title = "Largest queue per link class (sampled at each bin's start)";
    p.x_label = "time (us), bins of " + svg::format_value(plot_bin_us) + " us";
    p.y_label = "backlog (KB)";
    for (const auto& [name, v] : get(ts, "queue_max_bytes").items())
      p.series.push_back(time_series(name, merge(u64s(v), f, true), plot_bin_us, 1e-3));
    files.push_back({"queues.svg", svg::line_plot(p)});
  }
  {
    svg::BarPlot b;
    b.title = "Queue occupancy per link class over the run";
    b.y_label = "backlog (KB)";
    svg::BarSeries mx{"maximum", {}}, mean{"mean of links' max", {}};
    for (const auto& q : get(sum, "queues")) {
      b.categories.push_back(value_text(get(q, "class")));
      mx.values.push_back(static_cast<double>(num(get(q, "max_backlog_bytes"))) / 1e3);
      mean.values.push_back(num(get(q, "mean_max_backlog_bytes")) / 1e3);
    }
    b.series = {mx, mean};
    files.push_back({"queues_max.svg", svg::bar_plot(b)});
  }
  {
    svg::LinePlot p;
    p.title = "Retransmissions and EV retirements";
    p.x_label = "time (us), bins of " + svg::format_value(plot_bin_us) + " us";
    p.y_label = "per bin";
    p.series.push_back(time_series("retransmissions", merge(u64s(get(ts, "retransmits")), f, false),
                                   plot_bin_us, 1));
    p.series.push_back(time_series(
        "EV retirements", merge(u64s(get(ts, "ev_retirements")), f, false), plot_bin_us, 1));
    files.push_back({"retransmits.svg", svg::line_plot(p)});
  }

  // summary.md: parameters, figures, plots.
  std::string md = "# mrct sim run: " + workload + "\n\n";
  md += "Seed " + value_text(get(j, "seed")) + ", transport " +
        value_text(get(get(j, "engine"), "transport")) +
        ". Written by `mrct sim run --summary` (docs/simulation.md, \"Summary\"); the numbers "
        "are those of `result.json`.\n\n";
  md += "## Parameters\n\n| | |\n|---|---|\n";
  md += "| workload | " + workload + " |\n| seed | " + value_text(get(j, "seed")) + " |\n";
  for (const char* part : {"topology", "engine"})
    for (const auto& [k, v] : get(j, part).items())
      md += std::string("| ") + part + "." + k + " | " + value_text(v) + " |\n";
  md += "| timeseries.bin_ns | " + std::to_string(bin_ns) + " |\n";

  const auto& fct = get(sum, "fct_ns");
  const auto& sd = get(sum, "slowdown");
  const auto& rtx = get(sum, "retransmits");
  md += "\n## Results\n\n| | |\n|---|---|\n";
  md += "| flows completed | " + value_text(get(sum, "completed")) + " of " +
        value_text(get(sum, "flows")) + " (" + value_text(get(sum, "completed_with_error")) +
        " with an error) |\n";
  md += "| simulated time | " + fmt(num(get(sum, "sim_end_ns")) / 1e3, "%.1f") + " us |\n";
  md += "| FCT p50 / p90 / p99 / max | ";
  for (const char* q : {"p50", "p90", "p99", "max"})
    md += fmt(num(get(fct, q)) / 1e3, "%.1f") + (std::strcmp(q, "max") == 0 ? " us |\n" : " / ");
  md += "| slowdown p50 / p90 / p99 / max | ";
  for (const char* q : {"p50", "p90", "p99", "max"})
    md += fmt(num(get(sd, q)), "%.2f") + (std::strcmp(q, "max") == 0 ? " |\n" : " / ");
  md += "| aggregate goodput | " + fmt(num(get(sum, "goodput_gbps")), "%.1f") + " Gb/s |\n";
  md += "| data packets sent | " + value_text(get(sum, "data_packets_sent")) + " |\n";
  md += "| retransmissions (timeout / NACK / SACK gap / ACK wait) | " +
        value_text(get(rtx, "total")) + " (" + value_text(get(rtx, "timeout")) + " / " +
        value_text(get(rtx, "nack")) + " / " + value_text(get(rtx, "sack_gap")) + " / " +
        value_text(get(rtx, "ack_wait")) + ") |\n";
  md += "| trimmed headers received / CE marks received | " + value_text(get(sum, "trimmed_rx")) +
        " / " + value_text(get(sum, "ce_rx")) + " |\n";
  md += "| EV retirements | " + value_text(get(sum, "ev_retirements")) + " |\n";
  md += "| events | " + value_text(get(sum, "events")) + " |\n";
  md +=
      "\n| link class | links | max backlog (bytes) | mean of the links' max | drops | trims | "
      "ECN marks |\n|---|---|---|---|---|---|---|\n";
  for (const auto& q : get(sum, "queues")) {
    md += "| " + value_text(get(q, "class")) + " | " + value_text(get(q, "links")) + " | " +
          value_text(get(q, "max_backlog_bytes")) + " | " +
          fmt(num(get(q, "mean_max_backlog_bytes")), "%.0f") + " | " + value_text(get(q, "drops")) +
          " | " + value_text(get(q, "trims")) + " | " + value_text(get(q, "ecn_marks")) + " |\n";
  }
  md += "\n## Plots\n\n";
  md += "Time plots have bins of " + svg::format_value(plot_bin_us) + " us" +
        (f > 1 ? " (" + std::to_string(f) + " bins of the JSON's series merged per point)" : "") +
        ", each point at its bin's start.\n\n";
  md += "![FCT CDF](fct_cdf.svg)\n\n![FCT slowdown percentiles](slowdown.svg)\n\n";
  md += "![goodput over time, aggregate and per plane](goodput.svg)\n\n";
  md += "![largest queue per link class over time](queues.svg)\n\n";
  md += "![queue maximum per link class](queues_max.svg)\n\n";
  md += "![retransmissions and EV retirements over time](retransmits.svg)\n";
  files.insert(files.begin(), {"result.json", result_json_text});
  files.insert(files.begin(), {"summary.md", md});
  return files;
}
}  // namespace

std::vector<SummaryFile> summary_files(const std::string& result_json_text,
                                       const std::string& workload, std::string* error) {
  try {
    return make_summary(result_json_text, workload, error);
  } catch (const nlohmann::json::exception& e) {  // a field of the wrong type
    *error = std::string("summary: the result JSON does not fit: ") + e.what();
    return {};
  }
}

std::string summary_dir_problem(const std::string& dir) {
  if (dir.empty()) return "the summary directory is empty";
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    if (errno != ENOENT) return dir + ": " + std::strerror(errno);
    const size_t slash = dir.find_last_of('/');
    const std::string parent = slash == std::string::npos ? "." : dir.substr(0, slash + 1);
    if (::access(parent.c_str(), W_OK) != 0) return dir + ": cannot create (parent not writable)";
    return {};
  }
  if (!S_ISDIR(st.st_mode)) return dir + ": exists and is not a directory";
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return dir + ": " + std::strerror(errno);
  bool empty = true;
  while (dirent* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) empty = false;
  }
  ::closedir(d);
  return empty ? std::string()
               : dir + ": exists and is not empty (a summary needs a new directory)";
}

bool write_summary_dir(const std::string& dir, const std::vector<SummaryFile>& files,
                       std::string* error) {
  if (std::string p = summary_dir_problem(dir); !p.empty()) {
    *error = p;
    return false;
  }
  std::string base = dir;
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  const std::string tmp = base + ".tmp." + std::to_string(::getpid());
  auto cleanup = [&] {
    for (const SummaryFile& f : files) std::remove((tmp + "/" + f.name).c_str());
    ::rmdir(tmp.c_str());
  };
  if (::mkdir(tmp.c_str(), 0755) != 0) {
    *error = tmp + ": cannot create: " + std::strerror(errno);
    return false;
  }
  for (const SummaryFile& f : files) {
    std::ofstream out(tmp + "/" + f.name, std::ios::binary | std::ios::trunc);
    out << f.text;
    if (!out.flush()) {
      *error = tmp + "/" + f.name + ": write failed";
      cleanup();
      return false;
    }
  }
  // An empty directory at `dir` is replaced (rename(2) does that for an empty target).
  if (std::rename(tmp.c_str(), base.c_str()) != 0) {
    *error = dir + ": cannot rename the summary into place: " + std::strerror(errno);
    cleanup();
    return false;
  }
  return true;
}

}  // namespace mrc::simrun
