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

#include <nlohmann/json.hpp>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <iostream>
#include <mutex>
#include <thread>

#include "conformance/scripts/internal.h"

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
  ~NetnsTarget() override { stop(); }

  std::string name() const override {
    return mutant_ == runtime::Mutant::kNone
               ? "reference (netns)"
               : "reference+mutant:" + std::string(runtime::mutant_info(mutant_).name) + " (netns)";
  }

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
      x.status = c.value("status", 0u);
      x.opcode = c.value("opcode", 0u);
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
      // frames the script never asked for.
      if (!sh({"ip", "netns", "exec", *ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"},
              error) ||
          !sh({"ip", "netns", "exec", *ns, "sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1"},
              error) ||
          !sh({"ip", "-n", *ns, "link", "set", "lo", "up"}, error))
        return false;
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
    for (uint8_t p = 1; p <= s.planes; ++p)
      ifaces += (p > 1 ? "," : "") + std::string("i") + std::to_string(p);
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
    child_ = fork();
    if (child_ == 0) {
      dup2(in[0], 0);
      dup2(out[1], 1);
      if (!impl_log_.empty()) {
        const int fd = open(impl_log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) dup2(fd, 2);
      }
      std::vector<char*> a;
      for (const std::string& x : argv) a.push_back(const_cast<char*>(x.c_str()));
      a.push_back(nullptr);
      execvp(a[0], a.data());
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
      error = "the implementation did not start: " + error;
      return false;
    }
    if (ready.value("type", "") != "ready") {
      error = "the implementation did not start: " + ready.value("message", ready.dump());
      return false;
    }
    for (const auto& [k, v] : ready["vars"].items()) b.vars[k] = v.get<uint64_t>();
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
    if (r.contains("error")) {
      error = r["error"].get<std::string>();
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
  runtime::Mutant mutant_;
  std::string impl_log_;
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

// ---------------------------------------------------------------------------------------------
// `mrct script serve`: the reference in this namespace, answering on stdin/stdout
// ---------------------------------------------------------------------------------------------
int serve_main(const std::string& script_path, const std::vector<std::string>& ifaces,
               runtime::Mutant mutant) {
  auto fail = [](const std::string& msg) {
    std::cout << json{{"type", "error"}, {"message", msg}}.dump() << std::endl;
    return 1;
  };
  Script script;
  ParseError pe;
  if (!load_script(script_path, script, pe)) return fail(pe.format());
  const Setup& s = script.setup;
  if (ifaces.size() != s.planes)
    return fail("--ifaces: " + std::to_string(ifaces.size()) + " interfaces for " +
                std::to_string(s.planes) + " planes");
  runtime::RuntimeConfig rc;
  rc.endpoint = reference_config(s, gid(2));
  for (size_t p = 0; p < ifaces.size(); ++p)
    rc.planes.push_back({ifaces[p], tester_mac(static_cast<uint8_t>(p + 1))});
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
                                      {"status", c.status},
                                      {"opcode", c.opcode},
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

}  // namespace mrc::scripts
