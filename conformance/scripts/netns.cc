// The wire target: the implementation runs in its own network namespace, the tester in another,
// one veth pair per plane between them; the player injects and receives exact frames over
// AF_PACKET on the real clock. The implementation is either the reference (`mrct script serve`,
// the engine of the in-process target on the runtime's AF_PACKET back end, asked for memory,
// completions and requester work over its stdin/stdout) or a DUT command.
//
// Both namespaces are named after the process id and a counter, and are removed when the target
// stops, when the process exits, and on SIGINT/SIGTERM (the handler deletes them with
// fork+exec, which is async-signal-safe, then exits).
#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <toml++/toml.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <thread>

#include "conformance/scripts/internal.h"

extern char** environ;

namespace mrc::scripts {

namespace {

using nlohmann::json;

std::string hex_bytes(std::span<const std::byte> b) {
  static const char* k = "0123456789abcdef";
  std::string s;
  s.reserve(b.size() * 2);
  for (std::byte x : b) {
    s += k[std::to_integer<unsigned>(x) >> 4];
    s += k[std::to_integer<unsigned>(x) & 15];
  }
  return s;
}

std::string mac_text(const wire::MacAddr& m) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4],
                m[5]);
  return buf;
}

std::optional<wire::MacAddr> parse_mac(std::string_view s) {
  wire::MacAddr m{};
  unsigned v[6];
  char tail = 0;
  const std::string t(s);
  if (std::sscanf(t.c_str(), "%2x:%2x:%2x:%2x:%2x:%2x%c", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
                  &tail) != 6)
    return std::nullopt;
  for (int i = 0; i < 6; ++i) m[i] = static_cast<uint8_t>(v[i]);
  return m;
}

// Work completion statuses and opcodes travel as their ibverbs names (IBV_WC_SUCCESS,
// IBV_WC_RDMA_WRITE, ...): any implementation can print them, whatever its own numbering.
std::string wc_status_text(uint32_t status) {
  return std::string(engine::wc_status_name(static_cast<engine::WcStatus>(status)));
}
std::string wc_opcode_text(uint32_t opcode) {
  return static_cast<engine::WcOpcode>(opcode) == engine::WcOpcode::kRecvRdmaWithImm
             ? "IBV_WC_RECV_RDMA_WITH_IMM"
             : "IBV_WC_RDMA_WRITE";
}
// The script language's value of a name (IBV_WC_REM_ACCESS_ERR -> rem_access_err); a number is
// taken as it is; a name the language does not know reads as 0xFF, which no expectation
// names, so a `status=` matcher fails on it and shows it.
uint32_t wc_value(const json& v) {
  if (v.is_number_unsigned()) return v.get<uint32_t>();
  if (!v.is_string()) return 0xFF;
  std::string n = v.get<std::string>();
  if (n.rfind("IBV_WC_", 0) == 0) n = n.substr(7);
  std::transform(n.begin(), n.end(), n.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const std::optional<uint64_t> x = named_constant(n);
  return x ? static_cast<uint32_t>(*x) : 0xFF;
}

// ---------------------------------------------------------------------------------------------
// Namespaces: creation, and removal also on signals
// ---------------------------------------------------------------------------------------------
constexpr size_t kMaxNs = 8;
char g_ns_names[kMaxNs][64];
std::atomic<bool> g_ns_used[kMaxNs];
std::atomic<pid_t> g_child{0};

void del_ns_now(const char* name) {
  const pid_t p = fork();
  if (p == 0) {
    const int devnull = open("/dev/null", O_WRONLY);
    if (devnull >= 0) {
      dup2(devnull, 1);
      dup2(devnull, 2);
    }
    execlp("ip", "ip", "netns", "del", name, static_cast<char*>(nullptr));
    _exit(127);
  }
  if (p > 0) waitpid(p, nullptr, 0);
}

void on_signal(int sig) {
  const pid_t c = g_child.load();
  if (c > 0) {
    kill(c, SIGKILL);
    waitpid(c, nullptr, 0);
  }
  for (size_t i = 0; i < kMaxNs; ++i)
    if (g_ns_used[i].exchange(false)) del_ns_now(g_ns_names[i]);
  _exit(128 + sig);
}

void cleanup_at_exit() {
  for (size_t i = 0; i < kMaxNs; ++i)
    if (g_ns_used[i].exchange(false)) del_ns_now(g_ns_names[i]);
}

int register_ns(const std::string& name) {
  static std::once_flag once;
  std::call_once(once, [] {
    std::atexit(cleanup_at_exit);
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGHUP, &sa, nullptr);
    // An implementation that exits early (a DUT declining a script) closes its end of the
    // control pipe: writing to it must be an error to report, not a signal that kills us.
    signal(SIGPIPE, SIG_IGN);
  });
  for (size_t i = 0; i < kMaxNs; ++i) {
    if (g_ns_used[i].load()) continue;
    std::snprintf(g_ns_names[i], sizeof g_ns_names[i], "%s", name.c_str());
    g_ns_used[i] = true;
    return static_cast<int>(i);
  }
  return -1;
}

void unregister_ns(int slot) {
  if (slot >= 0 && g_ns_used[static_cast<size_t>(slot)].exchange(false))
    del_ns_now(g_ns_names[slot]);
}

// Runs a command (argv, no shell); output goes to `out`.
int run_cmd(const std::vector<std::string>& argv, std::string& out) {
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) return -1;
  const pid_t p = fork();
  if (p == 0) {
    dup2(pipefd[1], 1);
    dup2(pipefd[1], 2);
    std::vector<char*> a;
    for (const std::string& s : argv) a.push_back(const_cast<char*>(s.c_str()));
    a.push_back(nullptr);
    execvp(a[0], a.data());
    _exit(127);
  }
  close(pipefd[1]);
  char buf[512];
  ssize_t n = 0;
  while ((n = read(pipefd[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  close(pipefd[0]);
  int st = 0;
  if (p < 0 || waitpid(p, &st, 0) < 0) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

// Runs fn with the calling thread in namespace `ns` (sockets opened there stay there).
bool in_netns(const std::string& ns, const std::function<bool()>& fn, std::string& error) {
  const int self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  const int target = open(("/var/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
  if (self < 0 || target < 0 || setns(target, CLONE_NEWNET) != 0) {
    error = "cannot enter network namespace " + ns + ": " + std::strerror(errno);
    if (self >= 0) close(self);
    if (target >= 0) close(target);
    return false;
  }
  const bool ok = fn();
  if (setns(self, CLONE_NEWNET) != 0) {
    // The thread would go on in the wrong namespace: nothing sane is left to do.
    std::cerr << "mrct script: cannot return to the original network namespace\n";
    std::abort();
  }
  close(self);
  close(target);
  return ok;
}

// ---------------------------------------------------------------------------------------------
// The target
// ---------------------------------------------------------------------------------------------
class NetnsTarget : public Target {
 public:
  NetnsTarget(std::string mrct, std::string script_path, runtime::Mutant m, std::string impl_log)
      : mrct_(std::move(mrct)),
        script_path_(std::move(script_path)),
        mutant_(m),
        impl_log_(std::move(impl_log)) {}
  // A DUT's script command instead of the reference.
  NetnsTarget(std::string mrct, const Script& script, DutCommand dut, std::string impl_log)
      : mrct_(std::move(mrct)),
        script_path_(script.path),
        script_name_(script.name),
        mutant_(runtime::Mutant::kNone),
        impl_log_(std::move(impl_log)),
        dut_(std::move(dut)),
        is_dut_(true) {}
  ~NetnsTarget() override { stop(); }

  std::string name() const override {
    if (is_dut_) return "DUT " + dut_.name + " (netns)";
    return mutant_ == runtime::Mutant::kNone
               ? "reference (netns)"
               : "reference+mutant:" + std::string(runtime::mutant_info(mutant_).name) + " (netns)";
  }

  std::string unsupported_reason() const override { return unsupported_; }

  bool start(const Setup& s, Bindings& b, std::string& error) override {
    setup_ = s;
    if (geteuid() != 0) {
      error = "the netns target needs root (network namespaces)";
      return false;
    }
    static std::atomic<uint32_t> seq{0};
    const std::string base = "mrcs-" + std::to_string(getpid()) + "-" + std::to_string(++seq);
    tester_ns_ = base + "-t";
    impl_ns_ = base + "-i";
    if (!make_namespaces(error)) return false;
    b.dut_gid = gid(2);
    b.tester_gid = gid(1);
    b.dut_mac = dut_mac(1);
    b.tester_mac = tester_mac(1);
    if (!open_sockets(error)) return false;
    if (!start_impl(s, b, error)) return false;
    rx_stop_ = false;
    rx_thread_ = std::thread([this] { rx_loop(); });
    return true;
  }

  uint64_t now_ns() override { return runtime::monotonic_ns(); }

  bool inject(std::span<const std::byte> frame, uint8_t plane, std::string& error) override {
    if (plane < 1 || plane > socks_.size()) {
      error = "no plane " + std::to_string(plane);
      return false;
    }
    if (send(socks_[plane - 1], frame.data(), frame.size(), 0) !=
        static_cast<ssize_t>(frame.size())) {
      error = std::string("send on plane ") + std::to_string(plane) + ": " + std::strerror(errno);
      return false;
    }
    return true;
  }

  bool next_frame(uint64_t deadline_ns, TargetFrame& out) override {
    std::unique_lock<std::mutex> lk(mu_);
    while (rx_.empty()) {
      const uint64_t now = runtime::monotonic_ns();
      if (now >= deadline_ns) return false;
      cv_.wait_for(lk, std::chrono::nanoseconds(deadline_ns - now));
    }
    out = std::move(rx_.front());
    rx_.pop_front();
    return true;
  }

  std::vector<Completion> poll_completions() override {
    std::vector<Completion> out;
    json r;
    std::string err;
    if (!call({{"op", "completions"}}, r, err)) return out;
    for (const json& c : r.value("completions", json::array())) {
      Completion x;
      x.wr_id = c.value("wr_id", uint64_t{0});
      x.status = wc_value(c.value("status", json(0u)));
      x.opcode = wc_value(c.value("opcode", json(0u)));
      x.byte_len = c.value("len", 0u);
      x.imm = c.value("imm", 0u);
      x.with_imm = c.value("with_imm", false);
      x.qpn = c.value("qpn", 0u);
      out.push_back(x);
    }
    return out;
  }

  bool read_memory(uint64_t va, size_t len, std::vector<std::byte>& out,
                   std::string& error) override {
    json r;
    if (!call({{"op", "read"}, {"va", va}, {"len", len}}, r, error)) return false;
    std::string why;
    if (!parse_hex(r.value("hex", std::string()), out, why) || out.size() != len) {
      error = "the implementation's memory answer is malformed";
      return false;
    }
    return true;
  }

  bool post_write(uint64_t wr_id, uint32_t len, std::optional<uint32_t> imm, uint64_t va,
                  uint32_t rkey, uint8_t fill_seed, std::string& error) override {
    json q = {{"op", "post_write"}, {"wr_id", wr_id}, {"len", len},
              {"va", va},           {"rkey", rkey},   {"fill_seed", fill_seed}};
    if (imm) q["imm"] = *imm;
    json r;
    return call(q, r, error);
  }

  void stop() override {
    if (rx_thread_.joinable()) {
      rx_stop_ = true;
      rx_thread_.join();
    }
    for (int fd : socks_) close(fd);
    socks_.clear();
    if (child_ > 0) {
      if (to_child_ >= 0) {
        const std::string bye = "{\"op\":\"stop\"}\n";
        (void)!write(to_child_, bye.data(), bye.size());
      }
      // A hung implementation is killed at a bound.
      int st = 0;
      bool gone = false;
      for (int i = 0; i < 100 && !gone; ++i) {
        gone = waitpid(child_, &st, WNOHANG) == child_;
        if (!gone) usleep(10'000);
      }
      if (!gone) {
        kill(child_, SIGKILL);
        waitpid(child_, &st, 0);
      }
      child_ = -1;
      g_child = 0;
    }
    if (to_child_ >= 0) close(to_child_);
    if (from_child_ >= 0) close(from_child_);
    to_child_ = from_child_ = -1;
    unregister_ns(impl_slot_);
    unregister_ns(tester_slot_);
    impl_slot_ = tester_slot_ = -1;
  }

 private:
  bool sh(const std::vector<std::string>& argv, std::string& error) {
    std::string out;
    const int rc = run_cmd(argv, out);
    if (rc == 0) return true;
    std::string cmd;
    for (const std::string& a : argv) cmd += (cmd.empty() ? "" : " ") + a;
    error = cmd + " failed (exit " + std::to_string(rc) + "): " + out;
    return false;
  }

  bool make_namespaces(std::string& error) {
    for (auto [ns, slot] : {std::pair{&tester_ns_, &tester_slot_}, {&impl_ns_, &impl_slot_}}) {
      if (!sh({"ip", "netns", "add", *ns}, error)) return false;
      *slot = register_ns(*ns);
      if (*slot < 0) {
        del_ns_now(ns->c_str());
        error = "too many namespaces at once";
        return false;
      }
      // No IPv6 on the veths: the kernel's router solicitations and MLD reports would be
      // frames the script never asked for. A DUT's namespace keeps IPv6 without addresses
      // (addr_gen_mode 1: no link-local, hence no DAD, RS or MLD of its own): a MRC library
      // finds its next hop in the kernel's tables as on any host, below.
      const bool ipv6 = is_dut_ && *ns == impl_ns_;
      const std::vector<std::string> knobs =
          ipv6 ? std::vector<std::string>{"net.ipv6.conf.all.addr_gen_mode=1",
                                          "net.ipv6.conf.default.addr_gen_mode=1",
                                          "net.ipv6.conf.default.accept_dad=0",
                                          "net.ipv6.conf.default.router_solicitations=0",
                                          "net.ipv6.conf.default.accept_ra=0"}
               : std::vector<std::string>{"net.ipv6.conf.all.disable_ipv6=1",
                                          "net.ipv6.conf.default.disable_ipv6=1"};
      for (const std::string& k : knobs)
        if (!sh({"ip", "netns", "exec", *ns, "sysctl", "-qw", k}, error)) return false;
      if (!sh({"ip", "-n", *ns, "link", "set", "lo", "up"}, error)) return false;
    }
    for (uint8_t p = 1; p <= setup_.planes; ++p) {
      const std::string t = "t" + std::to_string(p), i = "i" + std::to_string(p);
      if (!sh({"ip",
               "-n",
               tester_ns_,
               "link",
               "add",
               t,
               "address",
               mac_text(tester_mac(p)),
               "mtu",
               "9000",
               "type",
               "veth",
               "peer",
               "name",
               i,
               "netns",
               impl_ns_,
               "address",
               mac_text(dut_mac(p)),
               "mtu",
               "9000"},
              error) ||
          !sh({"ip", "-n", tester_ns_, "link", "set", t, "up"}, error) ||
          !sh({"ip", "-n", impl_ns_, "link", "set", i, "up"}, error))
        return false;
    }
    // A DUT's route to the tester's GID on every port, with the tester's MAC as a permanent
    // neighbour (no NDP: the tester answers none): what MRC_NEXT_HOPS says, in the kernel's
    // tables.
    if (is_dut_) {
      char peer[64];
      inet_ntop(AF_INET6, gid(1).data(), peer, sizeof peer);
      for (uint8_t p = 1; p <= setup_.planes; ++p) {
        const std::string i = "i" + std::to_string(p);
        if (!sh({"ip", "-n", impl_ns_, "-6", "route", "add", std::string(peer) + "/128", "dev", i,
                 "metric", std::to_string(p)},
                error) ||
            !sh({"ip", "-n", impl_ns_, "-6", "neigh", "replace", peer, "lladdr",
                 mac_text(tester_mac(p)), "dev", i, "nud", "permanent"},
                error))
          return false;
      }
    }
    // The runtime takes a port that is not running at start as down, and IFF_RUNNING follows
    // the operational state, which the kernel's link watch sets up to a second after the
    // carrier: wait for "state UP".
    for (uint8_t p = 1; p <= setup_.planes; ++p) {
      const std::string i = "i" + std::to_string(p);
      for (int tries = 0;; ++tries) {
        std::string out;
        run_cmd({"ip", "-n", impl_ns_, "link", "show", i}, out);
        if (out.find("LOWER_UP") != std::string::npos && out.find("state UP") != std::string::npos)
          break;
        if (tries == 200) {
          error = "veth " + i + " in " + impl_ns_ + " has no carrier after 2 s: " + out;
          return false;
        }
        usleep(10'000);
      }
    }
    return true;
  }

  bool open_sockets(std::string& error) {
    return in_netns(
        tester_ns_,
        [&] {
          for (uint8_t p = 1; p <= setup_.planes; ++p) {
            const std::string name = "t" + std::to_string(p);
            const int fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_ALL));
            const unsigned idx = if_nametoindex(name.c_str());
            if (fd < 0 || idx == 0) {
              error = "AF_PACKET socket on " + name + ": " + std::strerror(errno);
              if (fd >= 0) close(fd);
              return false;
            }
            socks_.push_back(fd);
            // A burst of hundreds of frames (a 500-packet WRITE) must not overflow the default
            // receive buffer (about 200 KiB, a few hundred small frames): a frame dropped here
            // would be judged as one the implementation never sent.
            const int rcvbuf = 32 << 20;
            setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof rcvbuf);
            sockaddr_ll sll{};
            sll.sll_family = AF_PACKET;
            sll.sll_protocol = htons(ETH_P_ALL);
            sll.sll_ifindex = static_cast<int>(idx);
            if (bind(fd, reinterpret_cast<sockaddr*>(&sll), sizeof sll) != 0) {
              error = "bind AF_PACKET to " + name + ": " + std::strerror(errno);
              return false;
            }
          }
          return true;
        },
        error);
  }

  bool start_impl(const Setup& s, Bindings& b, std::string& error) {
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) {
      error = std::string("pipe: ") + std::strerror(errno);
      return false;
    }
    std::string ifaces;
    std::vector<std::string> iface_list;
    for (uint8_t p = 1; p <= s.planes; ++p) {
      iface_list.push_back("i" + std::to_string(p));
      ifaces += (p > 1 ? "," : "") + iface_list.back();
    }
    std::vector<std::string> argv = {
        "ip",
        "netns",
        "exec",
        impl_ns_,
        mrct_,
        "script",
        "serve",
        script_path_,
        "--ifaces",
        ifaces,
        "--mutant",
        std::string(mutant_ == runtime::Mutant::kNone ? "none"
                                                      : runtime::mutant_info(mutant_).name)};
    // The environment: ours, and for a DUT the contract's script mode (the header in MRC_*
    // variables, the profile's env) with the runner's own MRC_* variables left out.
    std::vector<std::string> env;
    std::string workdir;
    if (is_dut_) {
      argv = {"ip", "netns", "exec", impl_ns_, "/bin/sh", "-c", dut_.command};
      for (char** e = environ; *e != nullptr; ++e) {
        const std::string_view kv(*e);
        if (kv.rfind("MRC_", 0) != 0 && kv.rfind("MRCT=", 0) != 0) env.emplace_back(kv);
      }
      Script sc;
      sc.name = script_name_;
      sc.path = script_path_;
      sc.setup = s;
      for (const auto& [k, v] : script_env(sc, iface_list)) env.push_back(k + "=" + v);
      env.push_back("MRCT=" + mrct_);
      env.push_back("MRC_OUT=" + dut_.out_dir);
      for (const auto& [k, v] : dut_.env) env.push_back(k + "=" + v);
      workdir = dut_.out_dir;
    } else {
      for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
    }
    std::vector<char*> envp;
    for (const std::string& x : env) envp.push_back(const_cast<char*>(x.c_str()));
    envp.push_back(nullptr);
    std::vector<char*> a;
    for (const std::string& x : argv) a.push_back(const_cast<char*>(x.c_str()));
    a.push_back(nullptr);
    child_ = fork();
    if (child_ == 0) {
      dup2(in[0], 0);
      dup2(out[1], 1);
      if (!impl_log_.empty()) {
        const int fd = open(impl_log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) dup2(fd, 2);
      }
      if (!workdir.empty() && chdir(workdir.c_str()) != 0) _exit(126);
      execvpe(a[0], a.data(), envp.data());
      _exit(127);
    }
    close(in[0]);
    close(out[1]);
    to_child_ = in[1];
    from_child_ = out[0];
    if (child_ < 0) {
      error = std::string("fork: ") + std::strerror(errno);
      return false;
    }
    g_child = child_;
    json ready;
    if (!read_reply(ready, 10'000, error)) {
      // Gone before saying ready: its exit code says whether it declined (69) or could not
      // be run at all (126/127, the shell's).
      int st = 0;
      for (int i = 0; i < 50 && child_ > 0; ++i) {
        if (waitpid(child_, &st, WNOHANG) == child_) {
          child_ = -1;
          g_child = 0;
          const int rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
          if (rc == 69) {
            unsupported_ = "exit code 69";
            error = "the implementation declined the script (exit code 69)";
            return false;
          }
          error += " (exit code " + std::to_string(rc) +
                   (rc == 126 || rc == 127 ? ": /bin/sh could not run the command" : "") + ")";
          break;
        }
        usleep(10'000);
      }
      error = "the implementation did not start: " + error;
      return false;
    }
    const std::string type = ready.value("type", "");
    if (type == "unsupported") {
      const json& why = ready.contains("reason") ? ready["reason"] : ready["message"];
      unsupported_ = why.is_string() && !why.get<std::string>().empty() ? why.get<std::string>()
                                                                        : "no reason given";
      error = "unsupported: " + unsupported_;
      return false;
    }
    if (type != "ready") {
      error = "the implementation did not start: " +
              (ready.contains("message") && ready["message"].is_string()
                   ? ready["message"].get<std::string>()
                   : ready.dump());
      return false;
    }
    // The header's variables are the runner's; the implementation names its QP and region.
    bind_vars(s, ReferenceQp{}, b);
    const json vars = ready.value("vars", json::object());
    for (const char* k : {"dut_qpn", "va", "rkey"}) {
      if (!vars.contains(k) || !vars[k].is_number_unsigned()) {
        error = std::string("the implementation's ready line has no vars.") + k +
                " (an unsigned number): " + ready.dump();
        return false;
      }
      b.vars[k] = vars[k].get<uint64_t>();
    }
    return true;
  }

  // One request, one answer line; an answer not there within the bound is a hung
  // implementation.
  bool call(const json& q, json& r, std::string& error) {
    if (to_child_ < 0) {
      error = "the implementation is not running";
      return false;
    }
    const std::string line = q.dump() + "\n";
    if (write(to_child_, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
      error = "the implementation is gone (write to its control pipe failed)";
      return false;
    }
    if (!read_reply(r, 5'000, error)) return false;
    if (r.contains("unsupported")) {
      const json& u = r["unsupported"];
      unsupported_ = u.is_string() && !u.get<std::string>().empty()
                         ? u.get<std::string>()
                         : "the implementation cannot serve '" + q.value("op", "") + "'";
      error = "unsupported: " + unsupported_;
      return false;
    }
    if (r.contains("error")) {
      error = r["error"].is_string() ? r["error"].get<std::string>() : r["error"].dump();
      return false;
    }
    return true;
  }

  bool read_reply(json& r, int timeout_ms, std::string& error) {
    const uint64_t until = runtime::monotonic_ns() + uint64_t(timeout_ms) * 1'000'000;
    while (true) {
      const size_t nl = buf_.find('\n');
      if (nl != std::string::npos) {
        r = json::parse(buf_.substr(0, nl), nullptr, false);
        buf_.erase(0, nl + 1);
        if (r.is_discarded() || !r.is_object()) {
          error = "the implementation answered something that is not a JSON object";
          return false;
        }
        return true;
      }
      const uint64_t now = runtime::monotonic_ns();
      if (now >= until) {
        error = "no answer from the implementation within " + std::to_string(timeout_ms) + " ms";
        return false;
      }
      pollfd pfd{from_child_, POLLIN, 0};
      const int n = poll(&pfd, 1, static_cast<int>((until - now) / 1'000'000 + 1));
      if (n <= 0) continue;
      char tmp[4096];
      const ssize_t got = read(from_child_, tmp, sizeof tmp);
      if (got <= 0) {
        error = "the implementation exited (its control pipe closed)";
        return false;
      }
      buf_.append(tmp, static_cast<size_t>(got));
    }
  }

  void rx_loop() {
    std::vector<pollfd> pfds;
    for (int fd : socks_) pfds.push_back({fd, POLLIN, 0});
    std::vector<std::byte> buf(16384);
    while (!rx_stop_) {
      if (poll(pfds.data(), pfds.size(), 2) <= 0) continue;
      for (size_t p = 0; p < pfds.size(); ++p) {
        if (!(pfds[p].revents & POLLIN)) continue;
        while (true) {
          sockaddr_ll from{};
          socklen_t fl = sizeof from;
          const ssize_t n = recvfrom(pfds[p].fd, buf.data(), buf.size(), MSG_DONTWAIT,
                                     reinterpret_cast<sockaddr*>(&from), &fl);
          if (n <= 0) break;
          const uint64_t t = runtime::monotonic_ns();
          if (from.sll_pkttype == PACKET_OUTGOING) continue;  // our own injections
          std::span<const std::byte> f(buf.data(), static_cast<size_t>(n));
          wire::DecodedFrame d;
          wire::decode_frame(f, d);
          if (!d.roce) continue;  // not MRC: nothing a script judges
          TargetFrame tf;
          tf.bytes.assign(f.begin(), f.end());
          tf.plane = static_cast<uint8_t>(p + 1);
          tf.t_ns = t;
          {
            std::lock_guard<std::mutex> lk(mu_);
            rx_.push_back(std::move(tf));
          }
          cv_.notify_one();
        }
      }
    }
  }

  std::string mrct_;
  std::string script_path_;
  std::string script_name_;
  runtime::Mutant mutant_;
  std::string impl_log_;
  DutCommand dut_;
  bool is_dut_ = false;
  std::string unsupported_;
  Setup setup_;
  std::string tester_ns_, impl_ns_;
  int tester_slot_ = -1, impl_slot_ = -1;
  std::vector<int> socks_;
  pid_t child_ = -1;
  int to_child_ = -1, from_child_ = -1;
  std::string buf_;
  std::thread rx_thread_;
  std::atomic<bool> rx_stop_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<TargetFrame> rx_;
};

}  // namespace

std::unique_ptr<Target> make_netns_target(const std::string& mrct, const std::string& script_path,
                                          runtime::Mutant mutant, const std::string& impl_log) {
  return std::make_unique<NetnsTarget>(mrct, script_path, mutant, impl_log);
}

std::unique_ptr<Target> make_dut_target(const std::string& mrct, const Script& script,
                                        const DutCommand& dut, const std::string& impl_log) {
  return std::make_unique<NetnsTarget>(mrct, script, dut, impl_log);
}

// ---------------------------------------------------------------------------------------------
// `mrct script serve`: the reference in this namespace, answering on stdin/stdout
// ---------------------------------------------------------------------------------------------
namespace {

std::string env_text(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

}  // namespace

std::vector<std::pair<std::string, std::string>> script_env(
    const Script& script, const std::vector<std::string>& ifaces) {
  const Setup& s = script.setup;
  auto num = [](uint64_t v) { return std::to_string(v); };
  std::string ifs, hops;
  for (size_t p = 0; p < ifaces.size(); ++p) {
    ifs += (p ? "," : "") + ifaces[p];
    hops += (p ? "," : "") + ifaces[p] + "=" + mac_text(tester_mac(static_cast<uint8_t>(p + 1)));
  }
  char gid_dut[64], gid_tester[64];
  inet_ntop(AF_INET6, gid(2).data(), gid_dut, sizeof gid_dut);
  inet_ntop(AF_INET6, gid(1).data(), gid_tester, sizeof gid_tester);
  return {
      {"MRC_ROLE", "script"},
      {"MRC_SCRIPT", script.name},
      {"MRC_SCRIPT_FILE", script.path},
      {"MRC_SCRIPT_ROLE", s.role == Role::kRequester ? "requester" : "responder"},
      {"MRC_IFACES", ifs},
      {"MRC_PLANES", num(s.planes)},
      {"MRC_NEXT_HOPS", hops},
      {"MRC_GID", gid_dut},
      {"MRC_PEER_GID", gid_tester},
      {"MRC_EV_FORMAT", std::string(wire::ev_format_name(s.format))},
      {"MRC_EVS_PER_PLANE", "4"},
      {"MRC_PMTU", num(s.mtu)},
      {"MRC_MR_BYTES", num(s.mr_bytes)},
      {"MRC_MR_FILL", num(s.mr_fill)},
      {"MRC_PEER_QPN", num(s.tester_qpn)},
      {"MRC_RQ_PSN", num(s.tester_psn)},
      {"MRC_SQ_PSN", num(s.dut_psn)},
      {"MRC_PEER_VA", num(s.tester_va)},
      {"MRC_PEER_RKEY", num(s.tester_rkey)},
      {"MRC_MPR", num(s.mpr)},
      {"MRC_DYNAMIC_MPR", s.dynamic_mpr ? "1" : "0"},
      {"MRC_WIMM", num(s.max_wimm)},
      {"MRC_TIMEOUT", num(s.timeout)},
      {"MRC_RETRY", num(s.retry_linear) + ":" + num(s.retry_exp)},
      {"MRC_RECV_WQES", num(s.recv_wqes)},
      {"MRC_SVC_TIME", s.svc_time ? "1" : "0"},
      {"MRC_TRIM_NACK", s.trim_nack ? "1" : "0"},
      {"MRC_ACK_TRIGGER_BYTES", num(s.ack_trigger_bytes)},
      {"MRC_ACK_MIN_ADD_BYTES", num(s.ack_min_add_bytes)},
      {"MRC_REVERSE_PROBE_NS", num(s.reverse_probe_ns)},
  };
}

bool setup_from_env(Setup& s, std::vector<std::string>& ifaces, std::string& error) {
  auto get = [&](const char* name, uint64_t lo, uint64_t hi, uint64_t& out) {
    const std::string v = env_text(name);
    char* end = nullptr;
    errno = 0;
    const unsigned long long x = v.empty() ? 0 : std::strtoull(v.c_str(), &end, 0);
    if (v.empty() || errno != 0 || *end != '\0' || x < lo || x > hi) {
      error = std::string(name) + "='" + v + "': expected a number " + std::to_string(lo) + ".." +
              std::to_string(hi);
      return false;
    }
    out = x;
    return true;
  };
  uint64_t x = 0;
  const std::string role = env_text("MRC_SCRIPT_ROLE");
  if (role != "responder" && role != "requester") {
    error = "MRC_SCRIPT_ROLE='" + role + "': expected responder or requester";
    return false;
  }
  s.role = role == "requester" ? Role::kRequester : Role::kResponder;
  const std::optional<wire::EvFormat> fmt = wire::parse_ev_format(env_text("MRC_EV_FORMAT"));
  if (!fmt) {
    error = "MRC_EV_FORMAT='" + env_text("MRC_EV_FORMAT") + "': expected stev or udp";
    return false;
  }
  s.format = *fmt;
  ifaces.clear();
  std::string ifs = env_text("MRC_IFACES");
  for (size_t pos = 0; pos <= ifs.size();) {
    const size_t end = std::min(ifs.find(',', pos), ifs.size());
    if (end > pos) ifaces.push_back(ifs.substr(pos, end - pos));
    pos = end + 1;
  }
  if (!get("MRC_PLANES", 1, 4, x)) return false;
  s.planes = static_cast<uint8_t>(x);
  if (ifaces.size() != s.planes) {
    error = "MRC_IFACES='" + ifs + "': " + std::to_string(ifaces.size()) + " interfaces for " +
            std::to_string(s.planes) + " planes (MRC_PLANES)";
    return false;
  }
  struct U32 {
    const char* name;
    uint64_t lo, hi;
    uint32_t* out;
  };
  for (const U32& u :
       {U32{"MRC_PMTU", 256, 4096, &s.mtu}, U32{"MRC_MR_BYTES", 1, 1u << 26, &s.mr_bytes},
        U32{"MRC_PEER_QPN", 0, 0xFFFFFF, &s.tester_qpn},
        U32{"MRC_RQ_PSN", 0, 0xFFFFFF, &s.tester_psn}, U32{"MRC_SQ_PSN", 0, 0xFFFFFF, &s.dut_psn},
        U32{"MRC_PEER_RKEY", 0, 0xFFFFFFFF, &s.tester_rkey},
        U32{"MRC_RECV_WQES", 0, 256, &s.recv_wqes},
        U32{"MRC_ACK_TRIGGER_BYTES", 1, 1u << 30, &s.ack_trigger_bytes},
        U32{"MRC_ACK_MIN_ADD_BYTES", 0, 1u << 30, &s.ack_min_add_bytes}}) {
    if (!get(u.name, u.lo, u.hi, x)) return false;
    *u.out = static_cast<uint32_t>(x);
  }
  if (!get("MRC_MR_FILL", 0, 255, x)) return false;
  s.mr_fill = static_cast<uint8_t>(x);
  if (!get("MRC_PEER_VA", 0, UINT64_MAX, s.tester_va)) return false;
  if (!get("MRC_MPR", 1, 255, x)) return false;
  s.mpr = static_cast<uint8_t>(x);
  if (!get("MRC_WIMM", 0, 65535, x)) return false;
  s.max_wimm = static_cast<uint16_t>(x);
  if (!get("MRC_TIMEOUT", 0, 31, x)) return false;
  s.timeout = static_cast<uint8_t>(x);
  const std::string retry = env_text("MRC_RETRY");
  unsigned lin = 0, ex = 0;
  char tail = 0;
  if (std::sscanf(retry.c_str(), "%u:%u%c", &lin, &ex, &tail) != 2 || lin > 7 || ex > 7) {
    error = "MRC_RETRY='" + retry + "': expected LINEAR:EXP, each 0..7";
    return false;
  }
  s.retry_linear = static_cast<uint8_t>(lin);
  s.retry_exp = static_cast<uint8_t>(ex);
  for (auto [name, out] : {std::pair{"MRC_DYNAMIC_MPR", &s.dynamic_mpr},
                           {"MRC_SVC_TIME", &s.svc_time},
                           {"MRC_TRIM_NACK", &s.trim_nack}}) {
    if (!get(name, 0, 1, x)) return false;
    *out = x != 0;
  }
  return get("MRC_REVERSE_PROBE_NS", 0, UINT64_MAX, s.reverse_probe_ns);
}

bool load_dut_profile(const std::string& path, DutProfile& out, std::string& error) {
  toml::table doc;
  try {
    doc = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    error = path + ":" + std::to_string(e.source().begin.line) +
            ": TOML syntax: " + std::string(e.description());
    return false;
  }
  auto where = [&](const toml::node* n) {
    return path + ":" + std::to_string(n != nullptr ? n->source().begin.line : 0);
  };
  const toml::table* d = doc["dut"].as_table();
  if (d == nullptr) {
    error = path + ": [dut]: missing (the profile names its commands there)";
    return false;
  }
  out.cmd.name = std::filesystem::path(path).stem().string();
  if (const toml::node* n = d->get("name")) {
    if (!n->is_string()) {
      error = where(n) + ": dut.name: must be a string";
      return false;
    }
    out.cmd.name = **n->as_string();
  }
  const toml::node* sc = d->get("script");
  if (sc == nullptr) {
    error = path +
            ": dut.script: this profile has no script mode (a `script` command "
            "template, ci/dut/README.md \"Script mode\")";
    return false;
  }
  if (!sc->is_string() || (**sc->as_string()).find_first_not_of(" \t") == std::string::npos) {
    error = where(sc) + ": dut.script: must be a non-empty shell command";
    return false;
  }
  out.cmd.command = **sc->as_string();
  if (const toml::node* e = d->get("env")) {
    const toml::table* t = e->as_table();
    if (t == nullptr) {
      error = where(e) + ": dut.env: must be a table of strings";
      return false;
    }
    for (const auto& [k, v] : *t) {
      const std::string key(k.str());
      if (!v.is_string()) {
        error = where(&v) + ": dut.env." + key + ": must be a string";
        return false;
      }
      if (key.rfind("MRC_", 0) == 0 || key == "MRCT") {
        error = where(&v) + ": dut.env." + key + ": MRC_ names (and MRCT) belong to the runner";
        return false;
      }
      out.cmd.env.emplace_back(key, **v.as_string());
    }
  }
  const std::string dir = std::filesystem::absolute(path).parent_path().string();
  out.cmd.env.emplace_back("MRC_DUT_DIR", dir);
  out.capabilities.clear();
  if (const toml::table* caps = doc["capabilities"].as_table()) {
    for (const auto& [k, v] : *caps) {
      if (!v.is_boolean()) {
        error = where(&v) + ": capabilities." + std::string(k.str()) + ": must be true or false";
        return false;
      }
      out.capabilities[std::string(k.str())] = **v.as_boolean();
    }
  }
  return true;
}

std::string dut_unsupported(const DutProfile& d, const Setup& s) {
  auto has = [&](const std::string& cap) {
    const auto it = d.capabilities.find(cap);
    return it == d.capabilities.end() || it->second;  // the contract's defaults are on
  };
  const std::string fmt(wire::ev_format_name(s.format));
  if (!has(fmt)) return "DUT " + d.cmd.name + " lacks capability " + fmt;
  if (s.planes > 1 && !has("multi_plane"))
    return "DUT " + d.cmd.name + " lacks capability multi_plane";
  if (s.dynamic_mpr && d.capabilities.count("dynamic_mpr") && !d.capabilities.at("dynamic_mpr"))
    return "DUT " + d.cmd.name + " lacks capability dynamic_mpr";
  return {};
}

int serve_main(const Setup& s, const std::vector<std::string>& ifaces,
               const std::vector<wire::MacAddr>& next_hops, runtime::Mutant mutant) {
  auto fail = [](const std::string& msg) {
    std::cout << json{{"type", "error"}, {"message", msg}}.dump() << std::endl;
    return 1;
  };
  if (ifaces.size() != s.planes || next_hops.size() != s.planes)
    return fail("--ifaces: " + std::to_string(ifaces.size()) + " interfaces for " +
                std::to_string(s.planes) + " planes");
  runtime::RuntimeConfig rc;
  rc.endpoint = reference_config(s, gid(2));
  for (size_t p = 0; p < ifaces.size(); ++p) rc.planes.push_back({ifaces[p], next_hops[p]});
  rc.io = runtime::IoKind::kPacket;
  rc.mutant = mutant;
  runtime::Status st;
  std::unique_ptr<runtime::Runtime> rt = runtime::Runtime::create(rc, st);
  if (!rt) return fail("runtime: " + st.message);
  std::vector<uint64_t> mem((s.mr_bytes + 7) / 8, 0);
  ReferenceQp q;
  std::string error;
  if (!setup_reference_qp(rt->endpoint(), s, mutant, mem.data(), q, error)) return fail(error);
  Bindings b;
  bind_vars(s, q, b);
  st = rt->start();
  if (!st.ok()) return fail("runtime start: " + st.message);
  std::cout << json{{"type", "ready"}, {"vars", b.vars}}.dump() << std::endl;
  std::deque<std::vector<std::byte>> sources;
  std::string line;
  while (std::getline(std::cin, line)) {
    const json r = json::parse(line, nullptr, false);
    json out = json::object();
    const std::string op = r.is_object() ? r.value("op", "") : "";
    if (op == "stop") break;
    if (op == "completions") {
      std::vector<Completion> cs;
      rt->with_engine([&](engine::Endpoint& ep) { cs = poll_reference_cq(ep, q.cq); }, false);
      out["completions"] = json::array();
      for (const Completion& c : cs)
        out["completions"].push_back({{"wr_id", c.wr_id},
                                      {"status", wc_status_text(c.status)},
                                      {"opcode", wc_opcode_text(c.opcode)},
                                      {"len", c.byte_len},
                                      {"imm", c.imm},
                                      {"with_imm", c.with_imm},
                                      {"qpn", c.qpn}});
    } else if (op == "read") {
      const uint64_t va = r.value("va", uint64_t{0});
      const uint64_t len = r.value("len", uint64_t{0});
      if (va < q.mr.addr || va - q.mr.addr > q.mr.length || len > q.mr.length - (va - q.mr.addr)) {
        out["error"] = "memory range is outside the implementation's region";
      } else {
        std::vector<std::byte> bytes;
        rt->with_engine(
            [&](engine::Endpoint&) {
              const auto* p = reinterpret_cast<const std::byte*>(mem.data()) + (va - q.mr.addr);
              bytes.assign(p, p + len);
            },
            false);
        out["hex"] = hex_bytes(bytes);
      }
    } else if (op == "post_write") {
      std::optional<uint32_t> imm;
      if (r.contains("imm")) imm = r["imm"].get<uint32_t>();
      bool ok = false;
      rt->with_engine([&](engine::Endpoint& ep) {
        ok = post_reference_write(ep, q.qpn, sources, r.value("wr_id", uint64_t{0}),
                                  r.value("len", 0u), imm, r.value("va", uint64_t{0}),
                                  r.value("rkey", 0u),
                                  static_cast<uint8_t>(r.value("fill_seed", 0u)), error);
      });
      if (ok)
        out["ok"] = true;
      else
        out["error"] = error;
    } else {
      out["error"] = "unknown request '" + op + "'";
    }
    std::cout << out.dump() << std::endl;
  }
  rt->stop();
  return 0;
}

int serve_main(const std::string& script_path, const std::vector<std::string>& ifaces,
               runtime::Mutant mutant) {
  Script script;
  ParseError pe;
  if (!load_script(script_path, script, pe)) {
    std::cout << json{{"type", "error"}, {"message", pe.format()}}.dump() << std::endl;
    return 1;
  }
  std::vector<wire::MacAddr> hops;
  for (size_t p = 0; p < ifaces.size(); ++p)
    hops.push_back(tester_mac(static_cast<uint8_t>(p + 1)));
  return serve_main(script.setup, ifaces, hops, mutant);
}

int serve_env_main() {
  Setup s;
  std::vector<std::string> ifaces;
  std::string error;
  if (!setup_from_env(s, ifaces, error)) {
    std::cout << json{{"type", "error"}, {"message", error}}.dump() << std::endl;
    return 2;
  }
  // MRC_NEXT_HOPS: IFACE=MAC per plane, in MRC_IFACES order.
  std::vector<wire::MacAddr> hops(ifaces.size());
  std::vector<bool> have(ifaces.size(), false);
  const std::string list = env_text("MRC_NEXT_HOPS");
  for (size_t pos = 0; pos <= list.size();) {
    const size_t end = std::min(list.find(',', pos), list.size());
    const std::string item = list.substr(pos, end - pos);
    pos = end + 1;
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    const auto it = eq == std::string::npos
                        ? ifaces.end()
                        : std::find(ifaces.begin(), ifaces.end(), item.substr(0, eq));
    const std::optional<wire::MacAddr> mac =
        eq == std::string::npos ? std::nullopt : parse_mac(item.substr(eq + 1));
    if (it == ifaces.end() || !mac) {
      std::cout << json{{"type", "error"},
                        {"message", "MRC_NEXT_HOPS: '" + item +
                                        "': expected IFACE=MAC of one of "
                                        "MRC_IFACES"}}
                       .dump()
                << std::endl;
      return 2;
    }
    hops[static_cast<size_t>(it - ifaces.begin())] = *mac;
    have[static_cast<size_t>(it - ifaces.begin())] = true;
  }
  for (size_t p = 0; p < ifaces.size(); ++p) {
    if (!have[p]) {
      std::cout << json{{"type", "error"},
                        {"message", "MRC_NEXT_HOPS names no next hop for " + ifaces[p]}}
                       .dump()
                << std::endl;
      return 2;
    }
  }
  const std::string m = env_text("MRC_MUTANT");
  const std::optional<runtime::Mutant> mutant = runtime::parse_mutant(m.empty() ? "none" : m);
  if (!mutant) {
    std::cout << json{{"type", "error"}, {"message", "MRC_MUTANT='" + m + "' is unknown"}}.dump()
              << std::endl;
    return 2;
  }
  return serve_main(s, ifaces, hops, *mutant);
}

}  // namespace mrc::scripts
