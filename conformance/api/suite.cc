// The runner: binds the library in a forked child per test (a crash, an abort or a hang of the
// library under test is that test's failure, bounded by a timeout), collects the outcome
// through a pipe, and writes the reports.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "conformance/api/internal.h"
#include "conformance/report_text/report_text.h"

namespace mrc::api {

std::string Api::bind(const std::string& path) {
  handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) return std::string("cannot load ") + path + ": " + dlerror();
  auto sym = [&](const char* name) { return dlsym(handle, name); };
#define MRC_API_BIND(name) name = reinterpret_cast<decltype(name)>(sym(#name));
  MRC_API_FUNCTIONS(MRC_API_BIND)
#undef MRC_API_BIND
  get_device_list = reinterpret_cast<decltype(get_device_list)>(sym("ibv_get_device_list"));
  free_device_list = reinterpret_cast<decltype(free_device_list)>(sym("ibv_free_device_list"));
  get_device_name = reinterpret_cast<decltype(get_device_name)>(sym("ibv_get_device_name"));
  open_device = reinterpret_cast<decltype(open_device)>(sym("ibv_open_device"));
  close_device = reinterpret_cast<decltype(close_device)>(sym("ibv_close_device"));
  query_device = reinterpret_cast<decltype(query_device)>(sym("ibv_query_device"));
  query_gid = reinterpret_cast<decltype(query_gid)>(sym("ibv_query_gid"));
  alloc_pd = reinterpret_cast<decltype(alloc_pd)>(sym("ibv_alloc_pd"));
  dealloc_pd = reinterpret_cast<decltype(dealloc_pd)>(sym("ibv_dealloc_pd"));
  reg_mr = reinterpret_cast<decltype(reg_mr)>(sym("ibv_reg_mr"));
  dereg_mr = reinterpret_cast<decltype(dereg_mr)>(sym("ibv_dereg_mr"));
  // Every function but the two _ex calls (API 1.0.1) is mandatory.
  std::string missing;
  auto need = [&](const void* p, const char* name) {
    if (!p) missing += std::string(missing.empty() ? "" : ", ") + name;
  };
#define MRC_API_NEED(name) need(reinterpret_cast<const void*>(name), #name);
  MRC_API_FUNCTIONS(MRC_API_NEED)
#undef MRC_API_NEED
  need(reinterpret_cast<const void*>(get_device_list), "ibv_get_device_list");
  need(reinterpret_cast<const void*>(open_device), "ibv_open_device");
  need(reinterpret_cast<const void*>(alloc_pd), "ibv_alloc_pd");
  need(reinterpret_cast<const void*>(reg_mr), "ibv_reg_mr");
  need(reinterpret_cast<const void*>(query_gid), "ibv_query_gid");
  need(reinterpret_cast<const void*>(query_device), "ibv_query_device");
  // The _ex calls are optional: drop them from the list.
  for (const char* opt : {"mrc_query_device_ex", "mrc_ctl_query_device_ex"}) {
    const std::string o = opt;
    for (const std::string& pat : {", " + o, o + ", ", o}) {
      const size_t at = missing.find(pat);
      if (at != std::string::npos) {
        missing.erase(at, pat.size());
        break;
      }
    }
  }
  if (!missing.empty()) return path + " does not export: " + missing;
  return {};
}

std::string_view status_name(Status s) {
  switch (s) {
    case Status::kPass:
      return "pass";
    case Status::kFail:
      return "fail";
    case Status::kUnsupported:
      return "unsupported";
    case Status::kInformational:
      return "informational";
  }
  return "?";
}

std::span<const TestInfo> catalogue() {
  static const std::vector<TestInfo> rows = [] {
    std::vector<TestInfo> v;
    for (const TestDef& d : test_defs()) v.push_back(d.info);
    return v;
  }();
  return rows;
}

namespace {

using report_text::md_cell;
using report_text::xml_escape;

// Writes all of `s` to fd (the child's report to the parent).
void write_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    const ssize_t n = ::write(fd, s.data() + off, s.size() - off);
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

[[noreturn]] void child(const TestDef& def, const Options& o, int fd) {
  Status st = Status::kPass;
  std::string detail;
  Api api;
  const std::string err = api.bind(o.lib);
  if (!err.empty()) {
    st = Status::kFail;
    detail = err;
  } else {
    Fixture fx{api, o.device};
    try {
      def.fn(fx);
    } catch (const Outcome& out) {
      st = out.status;
      detail = out.detail;
    } catch (const std::exception& e) {
      st = Status::kFail;
      detail = std::string("exception: ") + e.what();
    }
  }
  write_all(fd, std::string(1, static_cast<char>('0' + static_cast<int>(st))) + detail);
  ::close(fd);
  // Objects are left to the process's end: teardown is what MRC-API-008/009/010 judge, and a
  // library that hangs in its destructors must not turn a pass into a timeout.
  _exit(0);
}

Result run_one(const TestDef& def, const Options& o) {
  Result r;
  r.id = std::string(def.info.id);
  const auto t0 = std::chrono::steady_clock::now();
  int p[2];
  if (pipe(p) != 0) {
    r.detail = "pipe failed";
    return r;
  }
  const pid_t pid = fork();
  if (pid < 0) {
    r.detail = "fork failed";
    ::close(p[0]);
    ::close(p[1]);
    return r;
  }
  if (pid == 0) {
    ::close(p[0]);
    child(def, o, p[1]);
  }
  ::close(p[1]);
  std::string msg;
  bool timed_out = false;
  const auto deadline = t0 + std::chrono::duration<double>(o.test_timeout_s);
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd pfd{p[0], POLLIN, 0};
    const int k = ::poll(&pfd, 1, static_cast<int>(std::min<long long>(left, 1000)));
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) continue;
    char buf[4096];
    const ssize_t n = ::read(p[0], buf, sizeof buf);
    if (n <= 0) break;  // the child closed its end (reported or died)
    msg.append(buf, static_cast<size_t>(n));
  }
  ::close(p[0]);
  int wst = 0;
  if (timed_out) {
    kill(pid, SIGKILL);
    waitpid(pid, &wst, 0);
    r.status = Status::kFail;
    r.detail =
        "timed out after " + std::to_string(static_cast<int>(o.test_timeout_s)) + " s (killed)";
  } else {
    // The report is written; give the child the rest of the budget to exit.
    for (;;) {
      const pid_t w = waitpid(pid, &wst, WNOHANG);
      if (w == pid) break;
      if (std::chrono::steady_clock::now() > deadline) {
        kill(pid, SIGKILL);
        waitpid(pid, &wst, 0);
        break;
      }
      usleep(2000);
    }
    if (!msg.empty() && msg[0] >= '0' && msg[0] <= '3') {
      r.status = static_cast<Status>(msg[0] - '0');
      r.detail = msg.substr(1);
    } else if (WIFSIGNALED(wst)) {
      r.status = Status::kFail;
      r.detail = std::string("the library crashed: signal ") + strsignal(WTERMSIG(wst));
    } else {
      r.status = Status::kFail;
      r.detail = "the test process exited (status " + std::to_string(WEXITSTATUS(wst)) +
                 ") without a result";
    }
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

const TestInfo* info_of(std::string_view id) {
  for (const TestInfo& t : catalogue())
    if (t.id == id) return &t;
  return nullptr;
}

std::map<Status, int> counts(const std::vector<Result>& results) {
  std::map<Status, int> c{{Status::kPass, 0},
                          {Status::kFail, 0},
                          {Status::kUnsupported, 0},
                          {Status::kInformational, 0}};
  for (const Result& r : results) c[r.status]++;
  return c;
}

}  // namespace

std::string probe_library(const std::string& lib) {
  int p[2];
  if (pipe(p) != 0) return "pipe failed";
  const pid_t pid = fork();
  if (pid == 0) {
    ::close(p[0]);
    Api api;
    write_all(p[1], api.bind(lib));
    _exit(0);
  }
  ::close(p[1]);
  std::string msg;
  char buf[1024];
  ssize_t n;
  while ((n = ::read(p[0], buf, sizeof buf)) > 0) msg.append(buf, static_cast<size_t>(n));
  ::close(p[0]);
  int wst = 0;
  waitpid(pid, &wst, 0);
  if (msg.empty() && !(WIFEXITED(wst) && WEXITSTATUS(wst) == 0))
    return "loading " + lib + " crashed the loader process";
  return msg;
}

std::vector<Result> run(const Options& o) {
  std::vector<Result> out;
  for (const TestDef& d : test_defs()) {
    if (!o.only.empty() &&
        std::find(o.only.begin(), o.only.end(), std::string(d.info.id)) == o.only.end())
      continue;
    out.push_back(run_one(d, o));
  }
  return out;
}

void write_json(std::ostream& out, const Options& o, const std::vector<Result>& results) {
  nlohmann::ordered_json j;
  j["suite"] = "mrc-api";
  j["library"] = o.lib;
  j["device"] =
      o.device.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(o.device);
  const auto c = counts(results);
  nlohmann::ordered_json sum;
  sum["tests"] = results.size();
  for (const auto& [s, n] : c) sum[std::string(status_name(s))] = n;
  sum["verdict"] = c.at(Status::kFail) ? "fail" : "pass";
  j["summary"] = sum;
  nlohmann::ordered_json arr = nlohmann::ordered_json::array();
  for (const Result& r : results) {
    const TestInfo* t = info_of(r.id);
    nlohmann::ordered_json e;
    e["id"] = r.id;
    e["area"] = t ? t->area : "";
    e["statement"] = t ? t->statement : "";
    e["source"] = t ? t->source : "";
    e["status"] = status_name(r.status);
    e["detail"] = r.detail;
    e["seconds"] = r.seconds;
    arr.push_back(std::move(e));
  }
  j["tests"] = arr;
  out << j.dump(2) << "\n";
}

void write_junit(std::ostream& out, const std::vector<Result>& results) {
  // One testsuite per area; unsupported is <skipped>, informational a pass with its text in
  // <system-out>.
  std::map<std::string, std::vector<const Result*>> by_area;
  for (const Result& r : results) {
    const TestInfo* t = info_of(r.id);
    by_area[std::string(t ? t->area : "other")].push_back(&r);
  }
  const auto c = counts(results);
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      << "<testsuites name=\"mrc-api\" tests=\"" << results.size() << "\" failures=\""
      << c.at(Status::kFail) << "\" errors=\"0\" skipped=\"" << c.at(Status::kUnsupported)
      << "\">\n";
  for (const auto& [area, v] : by_area) {
    int f = 0, s = 0;
    double secs = 0;
    for (const Result* r : v) {
      f += r->status == Status::kFail;
      s += r->status == Status::kUnsupported;
      secs += r->seconds;
    }
    out << "  <testsuite name=\"MRC-API-" << xml_escape(area) << "\" tests=\"" << v.size()
        << "\" failures=\"" << f << "\" errors=\"0\" skipped=\"" << s << "\" time=\"" << secs
        << "\">\n";
    for (const Result* r : v) {
      const TestInfo* t = info_of(r->id);
      out << "    <testcase classname=\"mrc.api." << xml_escape(area) << "\" name=\""
          << xml_escape(r->id) << "\" time=\"" << r->seconds << "\">\n";
      if (r->status == Status::kFail) {
        out << "      <failure message=\"" << xml_escape(r->detail) << "\">"
            << xml_escape(t ? t->statement : "") << "</failure>\n";
      } else if (r->status == Status::kUnsupported) {
        out << "      <skipped message=\"unsupported: " << xml_escape(r->detail) << "\"/>\n";
      } else if (r->status == Status::kInformational) {
        out << "      <system-out>informational: " << xml_escape(r->detail) << "</system-out>\n";
      }
      out << "    </testcase>\n";
    }
    out << "  </testsuite>\n";
  }
  out << "</testsuites>\n";
}

void write_markdown(std::ostream& out, const Options& o, const std::vector<Result>& results) {
  const auto c = counts(results);
  out << "# MRC API conformance: " << md_cell(o.lib) << "\n\n"
      << "**Verdict: " << (c.at(Status::kFail) ? "FAIL" : "PASS") << "** (" << results.size()
      << " tests: " << c.at(Status::kPass) << " pass, " << c.at(Status::kFail) << " fail, "
      << c.at(Status::kUnsupported) << " unsupported, " << c.at(Status::kInformational)
      << " informational)\n\n"
      << "| ID | Status | Test | Source | Detail | s |\n|---|---|---|---|---|---|\n";
  for (const Result& r : results) {
    const TestInfo* t = info_of(r.id);
    char secs[32];
    std::snprintf(secs, sizeof secs, "%.2f", r.seconds);
    out << "| " << r.id << " | " << status_name(r.status) << " | " << md_cell(t ? t->statement : "")
        << " | " << md_cell(t ? t->source : "") << " | " << md_cell(r.detail) << " | " << secs
        << " |\n";
  }
}

void print_catalogue(std::ostream& out, bool json) {
  if (json) {
    nlohmann::ordered_json arr = nlohmann::ordered_json::array();
    for (const TestInfo& t : catalogue()) {
      nlohmann::ordered_json j;
      j["id"] = t.id;
      j["statement"] = t.statement;
      j["source"] = {"API"};
      // The wire rules' contract fields, so `mrct rules --json` rows are uniform.
      j["severity"] = "error";
      j["side"] = "either";
      j["capture_points"] = "";
      j["capability"] = "";
      j["refs"] = nlohmann::ordered_json::array();
      j["implemented"] = true;
      j["tolerance"] = "";
      j["reference"] = t.source;
      j["area"] = t.area;
      j["kind"] = "api-test";
      arr.push_back(std::move(j));
    }
    out << arr.dump(2) << "\n";
    return;
  }
  for (const TestInfo& t : catalogue())
    out << t.id << "  api-test  " << t.area << "  [" << t.source << "]\n    " << t.statement
        << "\n";
}

std::string catalogue_markdown() {
  std::ostringstream o;
  o << "## API conformance suite (`mrct api-suite`)\n\n"
    << "One-node tests of a `lib_mrc.so` through `mrc.h` and `mrc_ctl.h` "
       "(conformance/api/README.md). Each runs in its own process; statuses: `pass`, `fail`, "
       "`unsupported` (an optional feature the library does not advertise), `informational` "
       "(the OCP text leaves the behaviour open or contradicts its examples: what the library "
       "does is reported, never failed).\n\n"
    << catalogue().size() << " tests.\n\n"
    << "| ID | Area | Test | Source |\n|---|---|---|---|\n";
  for (const TestInfo& t : catalogue())
    o << "| " << t.id << " | " << t.area << " | " << md_cell(t.statement) << " | API "
      << md_cell(t.source) << " |\n";
  o << "\n";
  return o.str();
}

}  // namespace mrc::api
