// Script results in the suite's report formats: JSON (one object per script, the fields
// `mrct suite` reads: scenario, verdict, reason, tags, timings), JUnit XML and Markdown.
#include <nlohmann/json.hpp>

#include "conformance/report_text/report_text.h"
#include "conformance/scripts/internal.h"

namespace mrc::scripts {

namespace {

using report_text::md_cell;
using report_text::xml_escape;

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : " ") + s;
  return out;
}

}  // namespace

std::string report_json(const std::vector<ScriptResult>& results) {
  nlohmann::json all = nlohmann::json::array();
  for (const ScriptResult& r : results) {
    nlohmann::json j;
    j["scenario"] = r.script;
    j["kind"] = "script";
    j["path"] = r.path;
    j["target"] = r.target;
    j["verdict"] = std::string(outcome_name(r.outcome));
    j["reason"] = r.error;
    j["rules"] = r.rules;
    j["tags"] = r.tags;
    j["timings"] = {{"total_s", r.seconds}};
    if (!r.pcap.empty()) j["artifacts"] = r.pcap;
    nlohmann::json sts = nlohmann::json::array();
    for (const StatementResult& s : r.statements) {
      nlohmann::json e;
      e["line"] = s.line;
      e["statement"] = s.text;
      e["status"] = std::string(outcome_name(s.outcome));
      e["t_ns"] = s.t_ns;
      if (!s.detail.empty()) e["detail"] = s.detail;
      if (!s.frames.empty()) e["frames"] = s.frames;
      sts.push_back(std::move(e));
    }
    j["statements"] = std::move(sts);
    all.push_back(std::move(j));
  }
  return all.dump(2) + "\n";
}

std::string report_junit(const std::vector<ScriptResult>& results) {
  size_t failures = 0;
  double total = 0;
  for (const ScriptResult& r : results) {
    failures += r.outcome == Outcome::kFail;
    total += r.seconds;
  }
  char t[32];
  std::snprintf(t, sizeof t, "%.3f", total);
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += "<testsuites name=\"mrct.script\" tests=\"" + std::to_string(results.size()) +
         "\" failures=\"" + std::to_string(failures) + "\" errors=\"0\" time=\"" + t + "\">\n";
  out += "  <testsuite name=\"mrct.script\" tests=\"" + std::to_string(results.size()) +
         "\" failures=\"" + std::to_string(failures) + "\" errors=\"0\" time=\"" + t + "\">\n";
  for (const ScriptResult& r : results) {
    std::snprintf(t, sizeof t, "%.3f", r.seconds);
    out += "    <testcase classname=\"mrct.script\" name=\"" + xml_escape(r.script) + "\" time=\"" +
           t + "\">\n";
    if (r.outcome == Outcome::kFail) {
      std::string detail;
      for (const StatementResult& s : r.statements) {
        if (s.outcome != Outcome::kFail) continue;
        detail += "line " + std::to_string(s.line) + ": " + s.text + "\n" + s.detail;
        for (const std::string& f : s.frames) detail += "\n  " + f;
      }
      out += "      <failure message=\"" + xml_escape(r.error) + "\">" + xml_escape(detail) +
             "</failure>\n";
    }
    out += "      <system-out>" + xml_escape("target " + r.target + "; rules " + join(r.rules)) +
           "</system-out>\n";
    out += "    </testcase>\n";
  }
  out += "  </testsuite>\n</testsuites>\n";
  return out;
}

std::string report_markdown(const std::vector<ScriptResult>& results) {
  size_t pass = 0;
  double total = 0;
  for (const ScriptResult& r : results) {
    pass += r.outcome == Outcome::kPass;
    total += r.seconds;
  }
  char head[160];
  std::snprintf(head, sizeof head, "%zu script(s): %zu pass, %zu fail; %.2f s", results.size(),
                pass, results.size() - pass, total);
  std::string out = "# MRC scripts\n\n" + std::string(head) + "\n\n";
  out += "| script | target | verdict | time (s) | rules | detail |\n|---|---|---|---|---|---|\n";
  for (const ScriptResult& r : results) {
    char tm[32];
    std::snprintf(tm, sizeof tm, "%.3f", r.seconds);
    out += "| " + md_cell(r.script) + " | " + md_cell(r.target) + " | " +
           std::string(outcome_name(r.outcome)) + " | " + tm + " | " + md_cell(join(r.rules)) +
           " | " + md_cell(r.error.substr(0, 200)) + " |\n";
  }
  return out;
}

}  // namespace mrc::scripts
