// Reporters: JSON (the architecture's report contract), JUnit XML (one testcase per rule),
// GitHub Markdown step summary, and the human summary.
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <ostream>

#include <nlohmann/json.hpp>

#include "conformance/internal.h"
#include "conformance/report_text/report_text.h"

namespace mrc::check {
namespace {

using report_text::md_cell;
using report_text::xml_escape;

std::string capture_name(const Report& r, uint32_t c) {
  if (c == UINT32_MAX || c >= r.captures.size()) return "";
  return r.captures[c].path;
}

std::string rel_time(const Report& r, uint64_t ts) {
  const double s = static_cast<double>(ts - std::min(ts, r.first_ts_ns)) / 1e9;
  char buf[32];
  std::snprintf(buf, sizeof buf, "+%.9f s", s);
  return buf;
}

std::string where(const Report& r, const Evidence& e) {
  std::string s;
  if (e.frame != 0)
    s = capture_name(r, e.capture) + " frame " + std::to_string(e.frame) + ", ";
  else
    s = "(injector log) ";
  return s + rel_time(r, e.ts_ns);
}

// "a.pcap frame 1, 2, 3; b.pcap frame 7, ..."
std::string examples(const Report& r, const UnrecognisedFrames& u) {
  std::string s;
  uint32_t cap = UINT32_MAX;
  for (const FrameRef& e : u.examples) {
    if (e.capture != cap) {
      s += (s.empty() ? "" : "; ") + capture_name(r, e.capture) + " frame ";
      cap = e.capture;
    } else {
      s += ", ";
    }
    s += std::to_string(e.frame);
  }
  if (u.frames > u.examples.size()) s += ", ...";
  return s;
}

// Where the docs live: docs/ of the repository, or the same files on GitHub when the report is
// written inside a GitHub Actions job (a step summary cannot follow relative links).
std::string docs_base() {
  if (const char* u = std::getenv("MRCT_DOCS_URL"); u && *u) {
    std::string b = u;
    return b.back() == '/' ? b : b + "/";
  }
  const char* server = std::getenv("GITHUB_SERVER_URL");
  const char* repo = std::getenv("GITHUB_REPOSITORY");
  const char* sha = std::getenv("GITHUB_SHA");
  if (server && repo && sha && *server && *repo && *sha)
    return std::string(server) + "/" + repo + "/blob/" + sha + "/docs/";
  return "docs/";
}

std::string rule_doc(std::string_view id) {
  std::string a = "rules.md#";
  for (char c : id) a += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return a;
}

// "[R6](docs/rule-sources.md#r6)" for each ref.
std::string md_refs(std::string_view refs) {
  std::string o;
  for (auto r : split_words(refs)) {
    if (!o.empty()) o += " ";
    o += "[" + std::string(r) + "](" + docs_base() + ref_anchor(r) + ")";
  }
  return o;
}

// The time allowances a reader needs to weigh a verdict, and which of them the profile set.
std::string tolerance_line(const Report& r) {
  const Tolerances& t = r.tolerances.values;
  std::string s = "reaction_ns " + std::to_string(t.reaction_ns) + ", end_grace_ns " +
                  std::to_string(t.end_grace_ns) + ", t_ack_max_ns " +
                  std::to_string(t.t_ack_max_ns) + ", t_port_ns " + std::to_string(t.t_port_ns);
  if (!r.tolerances.from_profile.empty()) {
    s += "; from the profile:";
    for (const auto& k : r.tolerances.from_profile) s += " " + k;
  }
  return s;
}

std::string area_of(std::string_view id) {
  // "MRC-REQ-004" -> "REQ"
  const size_t a = id.find('-');
  const size_t b = id.rfind('-');
  return a == std::string_view::npos || b <= a ? std::string(id)
                                               : std::string(id.substr(a + 1, b - a - 1));
}

}  // namespace

void write_json(const Report& r, std::ostream& out) {
  using nlohmann::ordered_json;
  ordered_json j;
  j["tool"] = "mrct check";
  j["report_version"] = 1;
  j["verdict"] = verdict_name(r.verdict());
  j["exit_code"] = r.exit_code();
  j["verdict_reasons"] = r.inconclusive;
  ordered_json sum;
  sum["rules"] = r.results.size();
  sum["pass"] = r.count(Status::kPass);
  sum["fail"] = r.count(Status::kFail);
  sum["warn"] = r.count(Status::kWarn);
  sum["not_applicable"] = r.count(Status::kNotApplicable);
  sum["not_run"] = r.count(Status::kNotRun);
  j["summary"] = sum;
  ordered_json tr;
  tr["frames"] = r.frames;
  tr["packets"] = r.packets;
  tr["mrc_frames"] = r.mrc_frames;
  tr["first_ts_ns"] = r.first_ts_ns;
  tr["last_ts_ns"] = r.last_ts_ns;
  tr["decisions"] = r.decisions;
  j["trace"] = tr;
  ordered_json tol;
  tol["preset"] = r.tolerances.preset;
  tol["from_profile"] = r.tolerances.from_profile;
  tol["derivation"] = r.tolerances.derivation;
  ordered_json vals;
  for (const auto& [k, v] : tolerance_values(r.tolerances.values)) vals[k] = ordered_json::parse(v);
  tol["values"] = vals;
  j["tolerances"] = tol;
  ordered_json caps = ordered_json::array();
  for (size_t i = 0; i < r.captures.size(); ++i) {
    const auto& c = r.captures[i];
    ordered_json cj;
    cj["index"] = i;
    cj["path"] = c.path;
    cj["node"] = c.node;
    cj["attribution"] = c.attribution;
    cj["format"] = c.pcapng ? "pcapng" : "pcap";
    cj["frames"] = c.frames;
    cj["roce_frames"] = c.roce_frames;
    cj["mrc_frames"] = c.mrc_frames;
    cj["decode_errors"] = c.decode_errors;
    cj["error"] = c.error;
    caps.push_back(std::move(cj));
  }
  j["captures"] = caps;
  ordered_json unrec = ordered_json::array();
  for (const auto& u : r.unrecognised) {
    ordered_json uj;
    uj["reason"] = u.reason;
    uj["frames"] = u.frames;
    ordered_json ex = ordered_json::array();
    for (const FrameRef& e : u.examples)
      ex.push_back(
          {{"capture", e.capture}, {"file", capture_name(r, e.capture)}, {"frame", e.frame}});
    uj["examples"] = ex;
    unrec.push_back(std::move(uj));
  }
  j["unrecognised"] = unrec;
  j["decision_logs"] = r.decision_logs;
  ordered_json flows = ordered_json::array();
  for (const auto& f : r.flows) {
    ordered_json fj;
    fj["requester"] = f.requester;
    fj["responder"] = f.responder;
    fj["requester_qpn"] = f.requester_qpn ? ordered_json(*f.requester_qpn) : ordered_json(nullptr);
    fj["responder_qpn"] = f.responder_qpn ? ordered_json(*f.responder_qpn) : ordered_json(nullptr);
    fj["configured"] = f.configured;
    fj["data_packets"] = f.data_packets;
    fj["retransmissions"] = f.retransmissions;
    fj["sacks"] = f.sacks;
    fj["nacks"] = f.nacks;
    fj["distinct_evs"] = f.distinct_evs;
    flows.push_back(std::move(fj));
  }
  j["flows"] = flows;
  j["notes"] = r.notes;
  ordered_json rules = ordered_json::array();
  for (const auto& rr : r.results) {
    ordered_json o;
    o["id"] = rr.rule->id;
    o["status"] = status_name(rr.status);
    o["severity"] = severity_name(rr.rule->severity);
    o["side"] = side_name(rr.rule->side);
    o["source"] = split_words(rr.rule->sources);
    o["refs"] = split_words(rr.rule->refs);
    // Paths from the repository root: the rule's section and the sections of its sources.
    o["doc"] = "docs/" + rule_doc(rr.rule->id);
    ordered_json rd = ordered_json::array();
    for (auto ref : split_words(rr.rule->refs)) rd.push_back("docs/" + ref_anchor(ref));
    o["refs_doc"] = rd;
    o["statement"] = rr.rule->statement;
    o["count"] = rr.violations;       // the architecture's report contract
    o["violations"] = rr.violations;  // the name testbed/mrctb reads
    o["checked"] = rr.checked;
    o["excused"] = rr.excused;
    o["reason"] = rr.reason;
    ordered_json ev = ordered_json::array();
    for (const auto& e : rr.evidence) {
      ordered_json ej;
      if (e.frame != 0) {
        ej["capture"] = e.capture;
        ej["file"] = capture_name(r, e.capture);
        ej["frame"] = e.frame;
      } else {
        ej["capture"] = nullptr;
        ej["frame"] = nullptr;
      }
      ej["ts_ns"] = e.ts_ns;
      if (e.from_ns != 0) ej["from_ns"] = e.from_ns;
      if (e.port != 0) ej["port"] = e.port;
      ej["message"] = e.message;
      ev.push_back(std::move(ej));
    }
    o["evidence"] = ev;
    rules.push_back(std::move(o));
  }
  j["rules"] = rules;
  out << j.dump(2) << "\n";
}

void write_junit(const Report& r, std::ostream& out) {
  std::map<std::string, std::vector<const RuleResult*>> areas;
  std::vector<std::string> order;
  for (const auto& rr : r.results) {
    const std::string a = area_of(rr.rule->id);
    if (!areas.count(a)) order.push_back(a);
    areas[a].push_back(&rr);
  }
  auto failing = [](const RuleResult* x) { return x->status == Status::kFail; };
  // A warning is reported as a skipped test case whose message starts with "WARNING": the
  // GitHub test reporters (dorny/test-reporter, EnricoMi/publish-unit-test-result-action,
  // mikepenz/action-junit-report) know only passed, failed, errored and skipped, and show a
  // skipped case and its message without failing the check run. A passing case's output, where
  // warnings used to go, none of them shows.
  auto skipped = [](const RuleResult* x) {
    return x->status == Status::kNotApplicable || x->status == Status::kNotRun ||
           x->status == Status::kWarn;
  };
  const bool inconclusive = r.verdict() == Verdict::kInconclusive;
  size_t fails = 0, skips = 0;
  for (const auto& rr : r.results) {
    fails += failing(&rr);
    skips += skipped(&rr);
  }
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      << "<testsuites name=\"mrc-conformance\" tests=\"" << r.results.size() + inconclusive
      << "\" failures=\"" << fails << "\" errors=\"" << (inconclusive ? 1 : 0) << "\" skipped=\""
      << skips << "\">\n";
  if (inconclusive) {
    // Its own test case, errored: an inconclusive run is neither a pass nor a rule failure.
    std::string body;
    for (const auto& why : r.inconclusive) body += "- " + why + "\n";
    if (!r.unrecognised.empty()) body += "Frames not recognised as MRC:\n";
    for (const auto& u : r.unrecognised)
      body += "- " + std::to_string(u.frames) + " x " + u.reason + " (" + examples(r, u) + ")\n";
    out << "  <testsuite name=\"MRC-VERDICT\" tests=\"1\" failures=\"0\" errors=\"1\" "
           "skipped=\"0\">\n"
        << "    <testcase classname=\"mrc.conformance.VERDICT\" name=\"verdict\">\n"
        << "      <error type=\"inconclusive\" message=\""
        << xml_escape("INCONCLUSIVE: " +
                      (r.inconclusive.empty() ? std::string() : r.inconclusive[0]))
        << "\">" << xml_escape(body) << "</error>\n"
        << "    </testcase>\n  </testsuite>\n";
  }
  for (const auto& a : order) {
    const auto& v = areas[a];
    size_t f = 0, s = 0;
    for (auto* x : v) {
      f += failing(x);
      s += skipped(x);
    }
    out << "  <testsuite name=\"MRC-" << xml_escape(a) << "\" tests=\"" << v.size()
        << "\" failures=\"" << f << "\" errors=\"0\" skipped=\"" << s << "\">\n";
    for (auto* x : v) {
      out << "    <testcase classname=\"mrc.conformance." << xml_escape(a) << "\" name=\""
          << xml_escape(x->rule->id) << "\">\n";
      std::string body;
      for (const auto& e : x->evidence) body += where(r, e) + ": " + e.message + "\n";
      if (x->status == Status::kFail) {
        out << "      <failure type=\"" << severity_name(x->rule->severity) << "\" message=\""
            << xml_escape(std::to_string(x->violations) +
                          " violation(s) of: " + std::string(x->rule->statement))
            << "\">" << xml_escape(body) << "</failure>\n";
      } else if (x->status == Status::kWarn) {
        out << "      <properties><property name=\"mrc.status\" value=\"warn\"/></properties>\n"
            << "      <skipped message=\""
            << xml_escape("WARNING: " + std::to_string(x->violations) + " violation(s) of " +
                          std::string(x->rule->id) + ": " + std::string(x->rule->statement) +
                          (x->evidence.empty() ? std::string()
                                               : " First: " + where(r, x->evidence[0]) + ": " +
                                                     x->evidence[0].message))
            << "\"/>\n"
            << "      <system-out>" << xml_escape(body) << "</system-out>\n";
      } else if (skipped(x)) {
        out << "      <skipped message=\""
            << xml_escape(std::string(status_name(x->status)) + ": " + x->reason) << "\"/>\n";
      }
      out << "    </testcase>\n";
    }
    out << "  </testsuite>\n";
  }
  out << "</testsuites>\n";
}

void write_markdown(const Report& r, std::ostream& out) {
  const uint64_t fails = r.count(Status::kFail);
  out << "## MRC conformance: " << verdict_name(r.verdict()) << "\n\n";
  for (const auto& why : r.inconclusive) out << "- " << md_cell(why) << "\n";
  if (!r.inconclusive.empty()) out << "\n";
  out << "| pass | fail | warn | not applicable | not run | frames | MRC frames | packets | QPs |\n"
      << "|---|---|---|---|---|---|---|---|---|\n"
      << "| " << r.count(Status::kPass) << " | " << fails << " | " << r.count(Status::kWarn)
      << " | " << r.count(Status::kNotApplicable) << " | " << r.count(Status::kNotRun) << " | "
      << r.frames << " | " << r.mrc_frames << " | " << r.packets << " | " << r.flows.size()
      << " |\n\n";
  out << "Tolerances: **" << r.tolerances.preset << "** (" << md_cell(tolerance_line(r)) << ")";
  if (!r.tolerances.derivation.empty()) out << ". Derived: " << md_cell(r.tolerances.derivation);
  out << "\n\n";
  bool any = false;
  for (const auto& rr : r.results) {
    if (rr.status != Status::kFail && rr.status != Status::kWarn) continue;
    if (!any) {
      out << "### Violations\n\n| Rule | Status | Count | First evidence |\n|---|---|---|---|\n";
      any = true;
    }
    out << "| [`" << rr.rule->id << "`](" << docs_base() << rule_doc(rr.rule->id) << ") "
        << md_cell(rr.rule->statement) << " (" << md_refs(rr.rule->refs) << ") | "
        << status_name(rr.status) << " | " << rr.violations << " | "
        << (rr.evidence.empty() ? ""
                                : md_cell(where(r, rr.evidence[0]) + ": " + rr.evidence[0].message))
        << " |\n";
  }
  if (any) out << "\n";
  if (!r.unrecognised.empty()) {
    out << "### Frames not recognised as MRC\n\n| Frames | Why | For example |\n|---|---|---|\n";
    for (const auto& u : r.unrecognised)
      out << "| " << u.frames << " | " << md_cell(u.reason) << " | " << md_cell(examples(r, u))
          << " |\n";
    out << "\n";
  }
  if (!r.notes.empty()) {
    out << "### Notes\n\n";
    for (const auto& n : r.notes) out << "- " << md_cell(n) << "\n";
    out << "\n";
  }
  out << "<details><summary>All " << r.results.size() << " rules</summary>\n\n"
      << "| Rule | Status | Checked | Violations | Source | Refs | Reason |\n"
      << "|---|---|---|---|---|---|---|\n";
  for (const auto& rr : r.results)
    out << "| `" << rr.rule->id << "` | " << status_name(rr.status) << " | " << rr.checked << " | "
        << rr.violations << " | " << rr.rule->sources << " | " << md_refs(rr.rule->refs) << " | "
        << md_cell(rr.reason) << " |\n";
  out << "\n</details>\n";
}

void write_human(const Report& r, std::ostream& out) {
  const uint64_t fails = r.count(Status::kFail), warns = r.count(Status::kWarn);
  out << "MRC conformance: " << verdict_name(r.verdict()) << " — " << fails << " rule(s) failed, "
      << warns << " warned, " << r.count(Status::kPass) << " passed, "
      << r.count(Status::kNotApplicable) << " not applicable, " << r.count(Status::kNotRun)
      << " not run\n";
  for (const auto& why : r.inconclusive) out << "  inconclusive: " << why << "\n";
  out << "  tolerances: " << r.tolerances.preset << " (" << tolerance_line(r) << ")\n";
  if (!r.tolerances.derivation.empty())
    out << "  tolerances derived: " << r.tolerances.derivation << "\n";
  out << "  " << r.frames << " frames (" << r.mrc_frames << " MRC), " << r.packets
      << " distinct packets, " << r.flows.size() << " QP(s)";
  if (r.decisions) out << ", " << r.decisions << " injector decisions";
  out << "\n";
  for (size_t i = 0; i < r.captures.size(); ++i) {
    const auto& c = r.captures[i];
    out << "  capture " << i << ": " << c.path << " ("
        << (c.node.empty() ? "unattributed" : c.node);
    if (!c.attribution.empty()) out << " by " << c.attribution;
    out << ", " << c.frames << " frames, " << c.roce_frames << " RoCE";
    if (c.decode_errors) out << ", " << c.decode_errors << " decode errors";
    out << ")\n";
  }
  constexpr size_t kShown = 8;
  for (size_t i = 0; i < r.unrecognised.size() && i < kShown; ++i) {
    const auto& u = r.unrecognised[i];
    out << "  not MRC: " << u.frames << " frame(s): " << u.reason << " (" << examples(r, u)
        << ")\n";
  }
  if (r.unrecognised.size() > kShown)
    out << "  not MRC: ... " << (r.unrecognised.size() - kShown) << " more reason(s), see --json\n";
  for (const auto& rr : r.results) {
    if (rr.status != Status::kFail && rr.status != Status::kWarn) continue;
    out << (rr.status == Status::kFail ? "FAIL " : "WARN ") << rr.rule->id << " (" << rr.violations
        << "x) " << rr.rule->statement << "\n";
    for (const auto& e : rr.evidence) out << "    " << where(r, e) << ": " << e.message << "\n";
    if (rr.violations > rr.evidence.size())
      out << "    ... " << (rr.violations - rr.evidence.size()) << " more\n";
  }
}

}  // namespace mrc::check
