// The runner: binds the library in a forked child per test (a crash, an abort or a hang of the
// library under test is that test's failure, bounded by a timeout), collects the outcome
// through a pipe, and writes the reports.
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <tuple>
#include <vector>

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

void Link::send(const void* p, size_t n) const {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t k = ::send(fd_, c, n, MSG_NOSIGNAL);
    if (k <= 0) throw Outcome{Status::kFail, std::string("the peer node is gone (send failed)")};
    c += k;
    n -= static_cast<size_t>(k);
  }
}

void Link::recv(void* p, size_t n, const char* what, double seconds) const {
  char* c = static_cast<char*>(p);
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (n > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          end - std::chrono::steady_clock::now())
                          .count();
    pollfd pfd{fd_, POLLIN, 0};
    const int r = left > 0 ? ::poll(&pfd, 1, static_cast<int>(left)) : 0;
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0)
      throw Outcome{Status::kFail, std::string("no word from the peer node within ") +
                                       std::to_string(static_cast<int>(seconds)) + " s (" + what +
                                       ")"};
    const ssize_t k = ::recv(fd_, c, n, 0);
    if (k <= 0) throw Outcome{Status::kFail, std::string("the peer node ended (") + what + ")"};
    c += k;
    n -= static_cast<size_t>(k);
  }
}

bool Link::wait_gone(double seconds) const {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          end - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) return false;
    pollfd pfd{fd_, POLLIN, 0};
    if (::poll(&pfd, 1, static_cast<int>(left)) <= 0) continue;
    char c;
    if (::recv(fd_, &c, 1, 0) <= 0) return true;  // EOF: the peer's process is gone
  }
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

// The two network namespaces of the two-node tests and the veth pair between them: node A's
// end carries fd7a:ab1::1, node B's ::2 (SoftMRC's MRC_SOFT_IFACES / MRC_SOFT_GID are set from
// these in each child; a vendor library learns its ports its own way and ignores them).
struct NodeNet {
  std::string netns, iface, gid;
};
NodeNet g_net[2];
bool g_net_up = false;

// Runs `ip ARGS...`; empty string on success, else the command line that failed.
std::string ip(std::vector<std::string> args) {
  args.insert(args.begin(), "ip");
  const pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execvp("ip", argv.data());
    _exit(127);
  }
  int wst = 0;
  if (pid < 0 || waitpid(pid, &wst, 0) != pid || !WIFEXITED(wst) || WEXITSTATUS(wst) != 0) {
    std::string cmd;
    for (const std::string& a : args) cmd += (cmd.empty() ? "" : " ") + a;
    return cmd + " failed";
  }
  return {};
}

// Removes both namespaces (and with them the veth pair). Also called from a signal handler:
// only fork, execvp and waitpid.
void net_down() {
  if (!g_net_up) return;
  for (const NodeNet& n : g_net) {
    const pid_t pid = fork();
    if (pid == 0) {
      const char* argv[] = {"ip", "netns", "del", n.netns.c_str(), nullptr};
      execvp("ip", const_cast<char* const*>(argv));
      _exit(127);
    }
    if (pid > 0) waitpid(pid, nullptr, 0);
  }
  g_net_up = false;
}

// Device mode (Options::softmrcd): the device processes of the running test, one per node,
// and the directory of their sockets and logs. Globals, so that a signal can stop them.
pid_t g_daemon[2] = {-1, -1};
char g_daemon_dir[64] = "";

// Stops the running test's device processes. Also called from a signal handler: only kill,
// waitpid and unlink.
void daemons_down() {
  for (pid_t& pid : g_daemon) {
    if (pid <= 0) continue;
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    pid = -1;
  }
}

// Removes the sockets' directory (its files are the two sockets and the two logs). Also called
// from a signal handler: only unlink and rmdir.
void daemon_dir_down() {
  if (g_daemon_dir[0] == '\0') return;
  for (const char* f : {"/a.sock", "/b.sock", "/a.log", "/b.log"}) {
    char path[sizeof g_daemon_dir + 8];  // no snprintf: a signal handler calls this
    size_t n = 0;
    for (const char* c = g_daemon_dir; *c != '\0' && n + 1 < sizeof path; ++c) path[n++] = *c;
    for (const char* c = f; *c != '\0' && n + 1 < sizeof path; ++c) path[n++] = *c;
    path[n] = '\0';
    unlink(path);
  }
  rmdir(g_daemon_dir);
  g_daemon_dir[0] = '\0';
}

pid_t g_runner = 0;  // the runner's pid: test processes inherit the handler, not the cleanup

extern "C" void net_down_on_signal(int sig) {
  if (getpid() == g_runner) {
    daemons_down();
    daemon_dir_down();
    net_down();
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

// The socket and the log of node `node`'s device process (0: node A or the one node).
std::string daemon_file(int node, const char* ext) {
  return std::string(g_daemon_dir) + "/" + (node == 0 ? "a" : "b") + ext;
}

// The last lines of a device process's log, for a failure's detail.
std::string log_tail(int node) {
  std::ifstream f(daemon_file(node, ".log"));
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (text.size() > 400) text = "..." + text.substr(text.size() - 400);
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return text.empty() ? "(no output)" : text;
}

// Starts node `node`'s softmrcd for one test: in the node's namespace (`in_netns`, with its
// interface and GID) or in the suite's own (a one-node test: the suite's environment, e.g.
// MRC_SOFT_IO=loopback). Returns once its socket exists; else the reason.
std::string daemon_up(const std::string& bin, int node, bool in_netns) {
  const std::string sock = daemon_file(node, ".sock"), log = daemon_file(node, ".log");
  unlink(sock.c_str());
  const pid_t pid = fork();
  if (pid < 0) return "fork failed";
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd >= 0) {
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
    }
    if (in_netns) {
      const NodeNet& n = g_net[node];
      const int ns = ::open(("/var/run/netns/" + n.netns).c_str(), O_RDONLY | O_CLOEXEC);
      if (ns < 0 || setns(ns, CLONE_NEWNET) != 0) {
        std::fprintf(stderr, "cannot enter network namespace %s\n", n.netns.c_str());
        _exit(127);
      }
      setenv("MRC_SOFT_IFACES", n.iface.c_str(), 1);
      setenv("MRC_SOFT_GID", n.gid.c_str(), 1);
      unsetenv("MRC_SOFT_IO");
    }
    unsetenv("MRC_SOFT_DEVICE");
    execl(bin.c_str(), bin.c_str(), "--socket", sock.c_str(), static_cast<char*>(nullptr));
    std::fprintf(stderr, "cannot run %s: %s\n", bin.c_str(), std::strerror(errno));
    _exit(127);
  }
  g_daemon[node] = pid;
  for (int i = 0; i < 500; ++i) {  // 10 s
    if (::access(sock.c_str(), F_OK) == 0) return {};
    int wst = 0;
    if (waitpid(pid, &wst, WNOHANG) == pid) {
      g_daemon[node] = -1;
      return "softmrcd of node " + std::string(node == 0 ? "A" : "B") +
             " exited before serving: " + log_tail(node);
    }
    usleep(20000);
  }
  return "softmrcd of node " + std::string(node == 0 ? "A" : "B") +
         " made no socket in 10 s: " + log_tail(node);
}

// Whether a device process died during the test (before the runner stopped it): the reason,
// else empty.
std::string daemon_died(int node) {
  const pid_t pid = g_daemon[node];
  if (pid <= 0) return {};
  int wst = 0;
  if (waitpid(pid, &wst, WNOHANG) != pid) return {};
  g_daemon[node] = -1;
  const std::string how = WIFSIGNALED(wst) ? std::string("signal ") + strsignal(WTERMSIG(wst))
                                           : "exit " + std::to_string(WEXITSTATUS(wst));
  return "softmrcd of node " + std::string(node == 0 ? "A" : "B") + " died during the test (" +
         how + "): " + log_tail(node);
}

std::string net_up() {
  const std::string pid = std::to_string(getpid());
  g_net[0] = {"mrcapi" + pid + "a", "mapi" + pid + "a", "fd7a:ab1::1"};
  g_net[1] = {"mrcapi" + pid + "b", "mapi" + pid + "b", "fd7a:ab1::2"};
  if (geteuid() != 0) return "the two-node tests need root (network namespaces, AF_PACKET)";
  g_net_up = true;  // from here on, whatever was made is removed on failure or a signal
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) signal(sig, net_down_on_signal);
  std::string err;
  auto run = [&](std::vector<std::string> args) {
    if (err.empty()) err = ip(std::move(args));
  };
  for (const NodeNet& n : g_net) run({"netns", "add", n.netns});
  run({"link", "add", g_net[0].iface, "type", "veth", "peer", "name", g_net[1].iface});
  for (const NodeNet& n : g_net) {
    run({"link", "set", n.iface, "netns", n.netns});
    run({"-n", n.netns, "addr", "add", n.gid + "/64", "dev", n.iface, "nodad"});
    run({"-n", n.netns, "link", "set", "lo", "up"});
    run({"-n", n.netns, "link", "set", n.iface, "mtu", "9000", "up"});
  }
  if (!err.empty()) net_down();
  return err;
}

// Enters node `node`'s namespace and points the reference device at its end of the pair.
std::string enter_node(int node) {
  const NodeNet& n = g_net[node];
  const int fd = ::open(("/var/run/netns/" + n.netns).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || setns(fd, CLONE_NEWNET) != 0)
    return "cannot enter network namespace " + n.netns + ": " + std::strerror(errno);
  ::close(fd);
  setenv("MRC_SOFT_IFACES", n.iface.c_str(), 1);
  setenv("MRC_SOFT_GID", n.gid.c_str(), 1);
  unsetenv("MRC_SOFT_IO");  // a wire between the nodes, not the one-node loopback
  return {};
}

// One test process: binds `lib`, runs the test (one-node, or one side of a two-node test when
// `link` is set), and writes its status digit and detail to `fd`.
[[noreturn]] void child(const TestDef& def, const std::string& lib, const std::string& device,
                        int fd, Link* link) {
  Status st = Status::kPass;
  std::string detail;
  Api api;
  std::string err = link ? enter_node(link->node()) : std::string();
  if (g_daemon_dir[0] != '\0')  // device mode: the node's softmrcd
    setenv("MRC_SOFT_DEVICE", daemon_file(link ? link->node() : 0, ".sock").c_str(), 1);
  if (err.empty()) err = api.bind(lib);
  if (!err.empty()) {
    st = Status::kFail;
    detail = err;
  } else {
    Fixture fx{api, device};
    try {
      if (link) {
        def.fn2(fx, *link);
      } else {
        def.fn(fx);
      }
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

// A running test process and what it reported.
struct Proc {
  pid_t pid = -1;
  int fd = -1;
  std::string msg;
  int wst = 0;
  bool timed_out = false;
};

// Reads every process's report until all have closed their pipes or the deadline passes; kills
// those still running then. Returns once every process is reaped.
void collect(std::vector<Proc>& ps, std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    std::vector<pollfd> pfds;
    std::vector<Proc*> owners;
    for (Proc& p : ps) {
      if (p.fd < 0) continue;
      pfds.push_back({p.fd, POLLIN, 0});
      owners.push_back(&p);
    }
    if (pfds.empty()) break;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) {
      for (Proc* p : owners) {
        p->timed_out = true;
        ::close(p->fd);
        p->fd = -1;
      }
      break;
    }
    const int k =
        ::poll(pfds.data(), pfds.size(), static_cast<int>(std::min<long long>(left, 1000)));
    if (k <= 0) continue;
    for (size_t i = 0; i < pfds.size(); ++i) {
      if (!pfds[i].revents) continue;
      char buf[4096];
      const ssize_t n = ::read(owners[i]->fd, buf, sizeof buf);
      if (n <= 0) {  // the child closed its end (reported or died)
        ::close(owners[i]->fd);
        owners[i]->fd = -1;
      } else {
        owners[i]->msg.append(buf, static_cast<size_t>(n));
      }
    }
  }
  for (Proc& p : ps) {
    if (p.timed_out) {
      kill(p.pid, SIGKILL);
      waitpid(p.pid, &p.wst, 0);
      continue;
    }
    // The report is written; give the child the rest of the budget to exit.
    for (;;) {
      const pid_t w = waitpid(p.pid, &p.wst, WNOHANG);
      if (w == p.pid) break;
      if (std::chrono::steady_clock::now() > deadline) {
        kill(p.pid, SIGKILL);
        waitpid(p.pid, &p.wst, 0);
        break;
      }
      usleep(2000);
    }
  }
}

// The status and detail one process's report amounts to.
std::pair<Status, std::string> outcome(const Proc& p, double timeout_s) {
  if (p.timed_out)
    return {Status::kFail,
            "timed out after " + std::to_string(static_cast<int>(timeout_s)) + " s (killed)"};
  if (!p.msg.empty() && p.msg[0] >= '0' && p.msg[0] <= '3')
    return {static_cast<Status>(p.msg[0] - '0'), p.msg.substr(1)};
  if (WIFSIGNALED(p.wst))
    return {Status::kFail,
            std::string("the library crashed: signal ") + strsignal(WTERMSIG(p.wst))};
  return {Status::kFail, "the test process exited (status " + std::to_string(WEXITSTATUS(p.wst)) +
                             ") without a result"};
}

Result run_one(const TestDef& def, const Options& o) {
  Result r;
  r.id = std::string(def.info.id);
  const auto t0 = std::chrono::steady_clock::now();
  const bool two = def.fn2 != nullptr;
  int sp[2] = {-1, -1};  // the two nodes' link
  if (two && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) != 0) {
    r.detail = "socketpair failed";
    return r;
  }
  std::vector<Proc> ps(two ? 2 : 1);
  if (!o.softmrcd.empty()) {
    for (int node = 0; node < (two ? 2 : 1) && r.detail.empty(); ++node)
      r.detail = daemon_up(o.softmrcd, node, two);
    if (!r.detail.empty()) {
      daemons_down();
      if (two) {
        ::close(sp[0]);
        ::close(sp[1]);
      }
      r.status = Status::kFail;
      r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      return r;
    }
  }
  for (size_t i = 0; i < ps.size(); ++i) {
    int p[2];
    if (pipe(p) != 0) {
      r.detail = "pipe failed";
      break;
    }
    const pid_t pid = fork();
    if (pid == 0) {
      ::close(p[0]);
      for (size_t j = 0; j < i; ++j) ::close(ps[j].fd);
      if (!two) child(def, o.lib, o.device, p[1], nullptr);
      ::close(sp[1 - i]);
      Link link(sp[i], static_cast<int>(i));
      child(def, i == 0 ? o.lib : o.peer_lib, i == 0 ? o.device : o.peer_device, p[1], &link);
    }
    ::close(p[1]);
    if (pid < 0) {
      ::close(p[0]);
      r.detail = "fork failed";
      break;
    }
    ps[i].pid = pid;
    ps[i].fd = p[0];
  }
  if (two) {
    ::close(sp[0]);
    ::close(sp[1]);
  }
  std::erase_if(ps, [](const Proc& p) { return p.pid < 0; });
  collect(ps, t0 + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                       std::chrono::duration<double>(o.test_timeout_s)));
  // A device process that died is the test's failure, whatever the test processes said.
  std::string died;
  for (int node = 0; node < 2; ++node) {
    const std::string d = daemon_died(node);
    if (!d.empty()) died += (died.empty() ? "" : "; ") + d;
  }
  daemons_down();
  if (!r.detail.empty()) {
    r.status = Status::kFail;
  } else if (!died.empty()) {
    r.status = Status::kFail;
    r.detail = died;
  } else if (!two) {
    std::tie(r.status, r.detail) = outcome(ps[0], o.test_timeout_s);
  } else {
    // Two nodes: a failure of either fails the test; details name the node.
    const auto a = outcome(ps[0], o.test_timeout_s);
    const auto b = outcome(ps[1], o.test_timeout_s);
    r.status = a.first == Status::kFail || b.first == Status::kFail ? Status::kFail
               : a.first != Status::kPass                           ? a.first
                                                                    : b.first;
    // A node that failed only because the other ended first adds nothing to the other's reason.
    auto echo = [](const std::pair<Status, std::string>& oc) {
      return oc.second.starts_with("the peer node ended") ||
             oc.second.starts_with("the peer node is gone");
    };
    const bool drop_a = echo(a) && b.first == Status::kFail && !echo(b);
    const bool drop_b = echo(b) && a.first == Status::kFail && !echo(a);
    for (const auto& [name, oc, drop] :
         {std::tuple{"node A", a, drop_a}, std::tuple{"node B", b, drop_b}}) {
      if (oc.second.empty() || drop) continue;
      r.detail += (r.detail.empty() ? "" : "; ") + std::string(name) + ": " + oc.second;
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

bool is_two_node(std::string_view id) {
  for (const TestDef& d : test_defs())
    if (d.info.id == id) return d.fn2 != nullptr;
  return false;
}

std::vector<Result> run(const Options& o, std::string* error) {
  std::vector<const TestDef*> todo;
  for (const TestDef& d : test_defs()) {
    if (!o.only.empty() &&
        std::find(o.only.begin(), o.only.end(), std::string(d.info.id)) == o.only.end())
      continue;
    if (d.fn2 && o.peer_lib.empty()) continue;  // two-node tests need --peer-lib
    todo.push_back(&d);
  }
  std::vector<Result> out;
  g_runner = getpid();
  if (!o.softmrcd.empty()) {
    if (::access(o.softmrcd.c_str(), X_OK) != 0) {
      if (error) *error = "--softmrcd: " + o.softmrcd + " is not an executable file";
      return out;
    }
    std::snprintf(g_daemon_dir, sizeof g_daemon_dir, "/tmp/mrcapi-softmrcd-XXXXXX");
    if (mkdtemp(g_daemon_dir) == nullptr) {
      g_daemon_dir[0] = '\0';
      if (error)
        *error = std::string("--softmrcd: cannot make a directory for its sockets: ") +
                 std::strerror(errno);
      return out;
    }
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) signal(sig, net_down_on_signal);
  }
  if (std::any_of(todo.begin(), todo.end(), [](const TestDef* d) { return d->fn2 != nullptr; })) {
    const std::string err = net_up();
    if (!err.empty()) {
      daemon_dir_down();
      if (error) *error = "--peer-lib: cannot make the two namespaces: " + err;
      return out;
    }
  }
  for (const TestDef* d : todo) out.push_back(run_one(*d, o));
  daemons_down();
  daemon_dir_down();
  net_down();
  return out;
}

void write_json(std::ostream& out, const Options& o, const std::vector<Result>& results) {
  nlohmann::ordered_json j;
  j["suite"] = "mrc-api";
  j["library"] = o.lib;
  j["peer_library"] =
      o.peer_lib.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(o.peer_lib);
  j["device"] =
      o.device.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(o.device);
  j["softmrcd"] =
      o.softmrcd.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(o.softmrcd);
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
  out << "# MRC API conformance: " << md_cell(o.lib) << "\n\n";
  if (!o.peer_lib.empty())
    out << "Two-node tests with node B on " << md_cell(o.peer_lib) << ".\n\n";
  if (!o.softmrcd.empty())
    out << "Device mode: a device process (" << md_cell(o.softmrcd) << ") per node and test.\n\n";
  out << "**Verdict: " << (c.at(Status::kFail) ? "FAIL" : "PASS") << "** (" << results.size()
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
    << "Tests of a `lib_mrc.so` through `mrc.h` and `mrc_ctl.h` "
       "(conformance/api/README.md): one-node tests, and two-node tests (area `two-node`, run "
       "with `--peer-lib`) between two network namespaces. Each runs in its own process (two "
       "for a two-node test); statuses: `pass`, `fail`, "
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
