// Integration (root): the relay in a middle namespace between two hosts, with real veths.
//
//   ns A: <p>a0 (02:00:00:00:01:01, 10.201.0.1) --veth-- <p>ma  ns M (mrc-inject)  <p>mb --veth--
//   <p>b0 (02:00:00:00:02:01, 10.201.0.2) :ns B        and a direct A <p>da --veth-- <p>db B
//
// <p> = "mrcfi" + pid. Frames crafted with the codec are sent from A with AF_PACKET and received
// in B with AF_PACKET; the relay's decision log, stdout summary and captures are checked against
// what arrived. Every namespace is deleted at the end, on failure too, and the test checks that
// none is left. Skipped (with the reason) when not root or when namespaces cannot be made.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "fault-injector/faults.h"
#include "fault-injector/test_frames.h"

extern char** environ;

namespace mrc::faults {
namespace {

using testing::Carrier;
using testing::data_frame;
using testing::DataSpec;

uint64_t mono_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

int sh(const std::string& cmd) {
  const int rc = std::system((cmd + " >/dev/null 2>&1").c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

std::string sh_out(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

std::vector<std::string> namespaces_with_prefix(const std::string& prefix) {
  std::vector<std::string> out;
  std::istringstream ss(sh_out("ip netns list 2>/dev/null"));
  std::string line;
  while (std::getline(ss, line)) {
    const std::string name = line.substr(0, line.find(' '));
    if (name.rfind(prefix, 0) == 0) out.push_back(name);
  }
  return out;
}

// Namespaces of runs that died without cleaning up (their pid is gone) are removed first.
void remove_stale_namespaces() {
  for (const std::string& ns : namespaces_with_prefix("mrcfi")) {
    const std::string digits = ns.substr(5, ns.find_first_not_of("0123456789", 5) - 5);
    if (digits.empty()) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(digits));
    if (pid != getpid() && kill(pid, 0) != 0 && errno == ESRCH) sh("ip netns del " + ns);
  }
}

// The three namespaces and their veths. The destructor deletes every namespace it created.
struct Topology {
  std::string p;  // "mrcfi<pid>"
  std::string ns_a, ns_m, ns_b;
  std::vector<std::string> created;
  std::string error;

  Topology() : p("mrcfi" + std::to_string(getpid())) {
    ns_a = p + "a";
    ns_m = p + "m";
    ns_b = p + "b";
  }

  ~Topology() { destroy(); }

  void destroy() {
    // Deleting a namespace destroys its veths, and with them the peers in other namespaces.
    for (auto it = created.rbegin(); it != created.rend(); ++it) sh("ip netns del " + *it);
    created.clear();
  }

  bool run(const std::string& cmd) {
    if (sh(cmd) == 0) return true;
    if (error.empty()) error = "failed: " + cmd;
    return false;
  }

  bool build() {
    for (const std::string& ns : {ns_a, ns_m, ns_b}) {
      if (!run("ip netns add " + ns)) return false;
      created.push_back(ns);
      // No IPv6 on any of them: no NDP/MLD chatter, so every frame on the wire is ours or ARP.
      if (!run("ip netns exec " + ns + " sysctl -qw net.ipv6.conf.all.disable_ipv6=1") ||
          !run("ip netns exec " + ns + " sysctl -qw net.ipv6.conf.default.disable_ipv6=1"))
        return false;
    }
    const std::string a0 = p + "a0", ma = p + "ma", mb = p + "mb", b0 = p + "b0";
    const std::string da = p + "da", db = p + "db";
    const std::string mac_a = "02:00:00:00:01:01", mac_b = "02:00:00:00:02:01";
    return run("ip -n " + ns_a + " link add " + a0 + " type veth peer name " + ma + " netns " +
               ns_m) &&
           run("ip -n " + ns_m + " link add " + mb + " type veth peer name " + b0 + " netns " +
               ns_b) &&
           run("ip -n " + ns_a + " link add " + da + " type veth peer name " + db + " netns " +
               ns_b) &&
           run("ip -n " + ns_a + " link set dev " + a0 + " address " + mac_a) &&
           run("ip -n " + ns_a + " link set dev " + da + " address " + mac_a) &&
           run("ip -n " + ns_b + " link set dev " + b0 + " address " + mac_b) &&
           run("ip -n " + ns_b + " link set dev " + db + " address " + mac_b) &&
           run("ip -n " + ns_a + " addr add 10.201.0.1/24 dev " + a0) &&
           run("ip -n " + ns_b + " addr add 10.201.0.2/24 dev " + b0) &&
           run("ip -n " + ns_a + " addr add 10.202.0.1/24 dev " + da) &&
           run("ip -n " + ns_b + " addr add 10.202.0.2/24 dev " + db) &&
           // Wire-correct checksums from the senders (research: veth leaves them partial).
           run("ip netns exec " + ns_a + " ethtool -K " + a0 + " tx off") &&
           run("ip netns exec " + ns_b + " ethtool -K " + b0 + " tx off") &&
           run("ip netns exec " + ns_a + " ethtool -K " + da + " tx off") &&
           run("ip netns exec " + ns_b + " ethtool -K " + db + " tx off") &&
           run("ip -n " + ns_a + " link set dev " + a0 + " up") &&
           run("ip -n " + ns_a + " link set dev " + da + " up") &&
           run("ip -n " + ns_m + " link set dev " + ma + " up") &&
           run("ip -n " + ns_m + " link set dev " + mb + " up") &&
           run("ip -n " + ns_b + " link set dev " + b0 + " up") &&
           run("ip -n " + ns_b + " link set dev " + db + " up");
  }
};

// An AF_PACKET socket bound to `ifname` inside namespace `ns` (the socket stays in that
// namespace after this thread returns to its own).
int packet_socket_in(const std::string& ns, const std::string& ifname, std::string* err) {
  const int self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  const int target = open(("/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
  int fd = -1;
  if (self >= 0 && target >= 0 && setns(target, CLONE_NEWNET) == 0) {
    fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_ALL));
    const int ifindex = static_cast<int>(if_nametoindex(ifname.c_str()));
    sockaddr_ll sll{};
    sll.sll_family = AF_PACKET;
    sll.sll_protocol = htons(ETH_P_ALL);
    sll.sll_ifindex = ifindex;
    if (fd < 0 || ifindex == 0 || bind(fd, reinterpret_cast<sockaddr*>(&sll), sizeof sll) != 0) {
      *err = "packet socket on " + ns + "/" + ifname + ": " + std::strerror(errno);
      if (fd >= 0) close(fd);
      fd = -1;
    }
    const int buf = 16 << 20;
    if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof buf);
    if (setns(self, CLONE_NEWNET) != 0) *err = "cannot return to the test's namespace";
  } else {
    *err = "cannot enter namespace " + ns + ": " + std::strerror(errno);
  }
  if (self >= 0) close(self);
  if (target >= 0) close(target);
  return fd;
}

// The relay process (`ip netns exec M mrc-inject run ...`); killed and reaped on destruction.
struct RelayProcess {
  pid_t pid = -1;
  int status = -1;

  bool start(const std::vector<std::string>& args, const std::string& out_path) {
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, (out_path + ".err").c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int rc = posix_spawnp(&pid, argv[0], &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) pid = -1;
    return rc == 0;
  }

  // SIGTERM, then wait up to timeout; SIGKILL if it hangs. Returns the exit code (-1 if killed).
  int stop(int timeout_ms = 5000) {
    if (pid <= 0) return status;
    kill(pid, SIGTERM);
    for (int waited = 0; waited < timeout_ms; waited += 10) {
      int st = 0;
      if (waitpid(pid, &st, WNOHANG) == pid) {
        pid = -1;
        status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        return status;
      }
      usleep(10000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    pid = -1;
    status = -1;
    return status;
  }

  ~RelayProcess() { stop(); }
};

std::string ctl(const std::string& sock, const std::string& line) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock.c_str());
  std::string reply;
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0) {
    const std::string l = line + "\n";
    if (send(fd, l.data(), l.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(l.size())) {
      char buf[65536];
      while (reply.find('\n') == std::string::npos) {
        pollfd p{fd, POLLIN, 0};
        if (poll(&p, 1, 2000) <= 0) break;
        const ssize_t n = read(fd, buf, sizeof buf);
        if (n <= 0) break;
        reply.append(buf, static_cast<size_t>(n));
      }
    }
  }
  close(fd);
  return reply;
}

bool wait_ready(const std::string& sock, int timeout_ms) {
  for (int waited = 0; waited < timeout_ms; waited += 20) {
    if (ctl(sock, "{\"cmd\":\"stats\"}").find("\"ok\":true") != std::string::npos) return true;
    usleep(20000);
  }
  return false;
}

struct Received {
  uint64_t roce = 0;
  uint64_t trimmed = 0;
  uint64_t icrc_bad = 0;
  std::vector<uint32_t> psns;
  uint64_t trimmed_dscp_ok = 0;
};

// Reads RoCE frames until `idle_ms` pass without one (or `max_ms` in total).
Received receive(int fd, int idle_ms, int max_ms) {
  Received r;
  std::vector<std::byte> buf(70000);
  const uint64_t start = mono_ns();
  uint64_t last = start;
  for (;;) {
    const uint64_t now = mono_ns();
    if (now - last > static_cast<uint64_t>(idle_ms) * 1'000'000 ||
        now - start > static_cast<uint64_t>(max_ms) * 1'000'000)
      break;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 20) <= 0) continue;
    const ssize_t n = recv(fd, buf.data(), buf.size(), MSG_DONTWAIT);
    if (n <= 0) continue;
    wire::DecodedFrame f;
    wire::decode_frame(wire::Bytes(buf.data(), static_cast<size_t>(n)), f, {.verify_icrc = true});
    if (!f.roce) continue;
    last = mono_ns();
    ++r.roce;
    r.psns.push_back(f.bth.psn);
    if (f.trimmed) {
      ++r.trimmed;
      if (f.dscp() == wire::mrp0().dscp().trimmed) ++r.trimmed_dscp_ok;
    } else if (!f.icrc_ok) {
      ++r.icrc_bad;
    }
  }
  return r;
}

// User + system CPU time of a process so far.
double cpu_seconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return 0;
  std::istringstream ss(stat.substr(paren + 2));
  std::string field;
  double utime = 0, stime = 0;
  for (int i = 3; ss >> field; ++i) {  // field 3 is the state; utime is 14, stime 15
    if (i == 14) utime = std::stod(field);
    if (i == 15) {
      stime = std::stod(field);
      break;
    }
  }
  return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

bool send_frame(int fd, const std::vector<std::byte>& f) {
  return send(fd, f.data(), f.size(), 0) == static_cast<ssize_t>(f.size());
}

class NetnsRelay : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    if (name.rfind("Measure", 0) == 0 && !std::getenv("MRC_FI_MEASURE"))
      GTEST_SKIP() << "set MRC_FI_MEASURE=1 to measure";
    if (geteuid() != 0) GTEST_SKIP() << "needs root (network namespaces, AF_PACKET)";
    if (sh("ip -V") != 0 || sh("ethtool --version") != 0) GTEST_SKIP() << "needs ip and ethtool";
    remove_stale_namespaces();
    // A namespace this process cannot create (a container without CAP_SYS_ADMIN) is an
    // environment limit, not a failure of the injector.
    const std::string probe = topo_.p + "probe";
    if (sh("ip netns add " + probe) != 0) GTEST_SKIP() << "cannot create network namespaces here";
    sh("ip netns del " + probe);
    char tmpl[] = "/tmp/mrcfi-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ASSERT_TRUE(topo_.build()) << topo_.error;
  }

  void TearDown() override {
    relay_.stop();
    topo_.destroy();
    // Nothing of ours may be left behind.
    EXPECT_TRUE(namespaces_with_prefix(topo_.p).empty());
    EXPECT_EQ(sh_out("ip -o link show 2>/dev/null").find(topo_.p), std::string::npos);
    // Artifacts (config, decision log, relay output, captures) stay for a failed run or when
    // MRC_FI_KEEP is set.
    const bool keep = HasFailure() || std::getenv("MRC_FI_KEEP");
    if (!dir_.empty() && !keep) std::filesystem::remove_all(dir_);
    if (!dir_.empty() && keep) std::cerr << "artifacts kept in " << dir_ << "\n";
  }

  std::vector<std::string> relay_args(const std::string& config,
                                      const std::vector<std::string>& extra) {
    std::vector<std::string> a = {"ip",           "netns",
                                  "exec",         topo_.ns_m,
                                  MRC_INJECT_BIN, "run",
                                  "--link",       "l0:" + topo_.p + "ma:" + topo_.p + "mb:0",
                                  "--control",    dir_ + "/ctl.sock",
                                  "--log",        dir_ + "/decisions.jsonl"};
    if (!config.empty()) {
      std::ofstream(dir_ + "/faults.toml") << config;
      a.push_back("-c");
      a.push_back(dir_ + "/faults.toml");
    }
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }

  Topology topo_;
  RelayProcess relay_;
  std::string dir_;
};

TEST_F(NetnsRelay, DropsTrimsDelaysFlapsAsLoggedAndCleansUp) {
  const std::string config = R"(
seed = 5
[[rule]]
name = "drop-100-199"
type = "drop"
dir = "ab"
psn = [100, 199]
[[rule]]
name = "trim-ev7"
type = "trim"
dir = "ab"
ev = 7
[[rule]]
name = "delay-ev3"
type = "delay"
ev = 3
delay_us = 2000
)";
  ASSERT_TRUE(relay_.start(relay_args(config, {"--pcap-dir", dir_}), dir_ + "/relay.out"));
  ASSERT_TRUE(wait_ready(dir_ + "/ctl.sock", 5000)) << sh_out("cat " + dir_ + "/relay.out.err");

  std::string err;
  const int tx = packet_socket_in(topo_.ns_a, topo_.p + "a0", &err);
  ASSERT_GE(tx, 0) << err;
  const int rx = packet_socket_in(topo_.ns_b, topo_.p + "b0", &err);
  ASSERT_GE(rx, 0) << err;

  // Non-RoCE traffic (ARP, ICMP) crosses the relay untouched.
  EXPECT_EQ(sh("ip netns exec " + topo_.ns_a + " ping -c 3 -i 0.2 -W 2 10.201.0.2"), 0);

  // Phase 1: 1000 data packets, PSN 0..999, EV = PSN mod 10, IPv4 and STEV (IPv6) alternating.
  const size_t n = 1000;
  for (size_t i = 0; i < n; ++i) {
    DataSpec s;
    s.carrier = i % 2 ? Carrier::kStev : Carrier::kUdp4;
    s.psn = static_cast<uint32_t>(i);
    s.wev = static_cast<uint32_t>(i % 10);
    s.payload = 512;
    ASSERT_TRUE(send_frame(tx, data_frame(s))) << std::strerror(errno);
    if (i % 50 == 49) usleep(2000);  // paced: the test checks policy decisions, not capacity
  }
  const Received r1 = receive(rx, 300, 5000);
  // drop 100 (PSN 100..199), trim EV 7 outside that range (90), delay EV 3 (90), pass 720.
  EXPECT_EQ(r1.roce, 900u);
  EXPECT_EQ(r1.trimmed, 90u);
  EXPECT_EQ(r1.trimmed_dscp_ok, 90u);
  EXPECT_EQ(r1.icrc_bad, 0u);
  EXPECT_TRUE(
      std::none_of(r1.psns.begin(), r1.psns.end(), [](uint32_t p) { return p >= 100 && p < 200; }));

  // Phase 2: flap now for 500 ms; 20 frames inside the window are lost, 20 after it pass.
  const std::string flap = ctl(dir_ + "/ctl.sock", "{\"cmd\":\"flap\",\"down_ms\":500}");
  EXPECT_NE(flap.find("\"ok\":true"), std::string::npos) << flap;
  for (uint32_t i = 0; i < 20; ++i) {
    DataSpec s;
    s.carrier = Carrier::kUdp4;
    s.psn = 2000 + i;
    s.wev = 0;
    ASSERT_TRUE(send_frame(tx, data_frame(s)));
  }
  const Received r2 = receive(rx, 200, 400);
  EXPECT_EQ(r2.roce, 0u);
  usleep(400'000);
  for (uint32_t i = 0; i < 20; ++i) {
    DataSpec s;
    s.carrier = Carrier::kUdp4;
    s.psn = 3000 + i;
    s.wev = 0;
    ASSERT_TRUE(send_frame(tx, data_frame(s)));
  }
  const Received r3 = receive(rx, 300, 3000);
  EXPECT_EQ(r3.roce, 20u);

  // Runtime rule over the control socket, then stats.
  const std::string add = ctl(
      dir_ + "/ctl.sock", R"({"cmd":"add_rule","rule":{"name":"bh","type":"blackhole","ev":9}})");
  EXPECT_NE(add.find("\"ok\":true"), std::string::npos) << add;
  for (uint32_t i = 0; i < 10; ++i) {
    DataSpec s;
    s.carrier = Carrier::kUdp4;
    s.psn = 4000 + i;
    s.wev = 8 + i % 2;  // half on the blackholed EV 9
    ASSERT_TRUE(send_frame(tx, data_frame(s)));
  }
  const Received r4 = receive(rx, 300, 3000);
  EXPECT_EQ(r4.roce, 5u);
  const auto stats = nlohmann::json::parse(ctl(dir_ + "/ctl.sock", "{\"cmd\":\"stats\"}"));
  EXPECT_EQ(stats["stats"]["rules"]["bh"], 5);
  EXPECT_EQ(stats["stats"]["relay"]["kernel_drops"], 0);
  close(tx);
  close(rx);

  ASSERT_EQ(relay_.stop(), 0) << sh_out("cat " + dir_ + "/relay.out.err");

  // The decision log: one line per RoCE frame (log_pass), then the summary.
  std::ifstream log(dir_ + "/decisions.jsonl");
  ASSERT_TRUE(log) << "no decision log";
  std::map<std::string, uint64_t> actions;
  std::map<std::string, uint64_t> reasons;
  nlohmann::json summary;
  std::string line;
  uint64_t lines = 0;
  while (std::getline(log, line)) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("summary")) {
      summary = j["summary"];
      continue;
    }
    ++lines;
    EXPECT_EQ(j["seed"], 5);
    EXPECT_EQ(j["link"], "l0");
    if (j["qpn"].is_null()) continue;  // a non-RoCE frame the policy touched (none expected)
    ++actions[j["action"].get<std::string>()];
    const uint64_t psn = j["psn"];
    if (psn >= 100 && psn < 200) {
      EXPECT_EQ(j["action"], "drop");
      EXPECT_EQ(j["rules"], "drop-100-199");
    }
    if (psn >= 2000 && psn < 2020) {
      EXPECT_EQ(j["action"], "drop");
      EXPECT_EQ(j["reason"], "link down (flap now)");
    }
  }
  EXPECT_EQ(lines, 1050u);
  EXPECT_EQ(actions["drop"], 100u + 20u + 5u);
  EXPECT_EQ(actions["trim"], 90u);
  EXPECT_EQ(actions["delay"], 90u);
  EXPECT_EQ(actions["pass"], 720u + 20u + 5u);
  ASSERT_TRUE(summary.is_object());
  EXPECT_EQ(summary["links"]["l0"]["ab"]["drop"], 125);
  EXPECT_EQ(summary["links"]["l0"]["ab"]["trim"], 90);
  EXPECT_EQ(summary["rules"]["drop-100-199"], 100);
  EXPECT_EQ(summary["rules"]["trim-ev7"], 90);

  // The relay's own summary on stdout agrees and saw no kernel drops.
  std::ifstream out(dir_ + "/relay.out");
  std::string out_line;
  ASSERT_TRUE(std::getline(out, out_line));
  const auto rs = nlohmann::json::parse(out_line)["summary"];
  EXPECT_EQ(rs["links"]["l0"]["ab"]["trim"], 90);
  EXPECT_EQ(rs["relay"]["kernel_drops"], 0);
  EXPECT_EQ(rs["relay"]["tx_errors"], 0);

  // Captures: side b carries what B received (RoCE frames: 900 + 20 + 5).
  wire::CaptureReader cap;
  ASSERT_TRUE(cap.open(dir_ + "/inject-" + topo_.p + "mb.pcap")) << cap.error();
  wire::CaptureRecord rec;
  uint64_t cap_roce = 0, cap_trimmed = 0;
  while (cap.next(rec)) {
    wire::DecodedFrame f;
    wire::decode_frame(rec.data, f);
    cap_roce += f.roce;
    cap_trimmed += f.trimmed;
  }
  EXPECT_EQ(cap_roce, 925u);
  EXPECT_EQ(cap_trimmed, 90u);
}

// Figures for the closing note, by hand: MRC_FI_MEASURE=1 ./mrc_faults_test
// --gtest_filter=NetnsRelay.Measure*. Prints frames/s and one-way latency through the relay and
// through a plain veth pair, for pass-through and a 1 % loss policy.
TEST_F(NetnsRelay, MeasureThroughputAndLatency) {
  std::string err;
  const int tx_relay = packet_socket_in(topo_.ns_a, topo_.p + "a0", &err);
  const int rx_relay = packet_socket_in(topo_.ns_b, topo_.p + "b0", &err);
  const int tx_direct = packet_socket_in(topo_.ns_a, topo_.p + "da", &err);
  const int rx_direct = packet_socket_in(topo_.ns_b, topo_.p + "db", &err);
  ASSERT_TRUE(tx_relay >= 0 && rx_relay >= 0 && tx_direct >= 0 && rx_direct >= 0) << err;
  DataSpec s;
  s.carrier = Carrier::kUdp4;
  s.payload = 64;
  const auto frame = data_frame(s);

  // One-way latency: send one frame, wait for it on the far side (same clock, same process).
  auto latency = [&](int tx, int rx, int samples) {
    std::vector<uint64_t> us;
    std::vector<std::byte> buf(2048);
    for (int i = 0; i < samples; ++i) {
      while (recv(rx, buf.data(), buf.size(), MSG_DONTWAIT) > 0) {
      }
      const uint64_t t0 = mono_ns();
      if (!send_frame(tx, frame)) continue;
      for (;;) {
        pollfd p{rx, POLLIN, 0};
        if (poll(&p, 1, 200) <= 0) break;
        const ssize_t n = recv(rx, buf.data(), buf.size(), MSG_DONTWAIT);
        if (n == static_cast<ssize_t>(frame.size())) {
          us.push_back(mono_ns() - t0);
          break;
        }
      }
    }
    std::sort(us.begin(), us.end());
    return us;
  };
  // Throughput: a receiver thread counts while the sender blasts batches.
  auto throughput = [&](int tx, int rx, size_t frames) {
    std::atomic<bool> done{false};
    std::atomic<uint64_t> got{0};
    uint64_t last_rx = 0;
    std::thread counter([&] {
      std::vector<std::byte> buf(2048);
      while (!done) {
        pollfd p{rx, POLLIN, 0};
        if (poll(&p, 1, 50) <= 0) continue;
        while (recv(rx, buf.data(), buf.size(), MSG_DONTWAIT) > 0) {
          ++got;
          last_rx = mono_ns();
        }
      }
    });
    const uint64_t t0 = mono_ns();
    std::vector<mmsghdr> msgs(64);
    std::vector<iovec> iov(64);
    for (size_t i = 0; i < 64; ++i) {
      iov[i] = {const_cast<std::byte*>(frame.data()), frame.size()};
      msgs[i] = {};
      msgs[i].msg_hdr.msg_iov = &iov[i];
      msgs[i].msg_hdr.msg_iovlen = 1;
    }
    for (size_t sent = 0; sent < frames;) {
      const int k =
          sendmmsg(tx, msgs.data(), static_cast<unsigned>(std::min<size_t>(64, frames - sent)), 0);
      if (k > 0) sent += static_cast<size_t>(k);
    }
    const uint64_t t_sent = mono_ns();
    usleep(500'000);
    done = true;
    counter.join();
    const double secs = static_cast<double>(std::max(last_rx, t_sent) - t0) / 1e9;
    return std::make_pair(got.load(), static_cast<double>(got.load()) / secs);
  };
  auto report = [](const char* what, const std::vector<uint64_t>& us) {
    if (us.empty()) return;
    std::printf("%-28s one-way latency: median %.1f us, p99 %.1f us (%zu samples)\n", what,
                static_cast<double>(us[us.size() / 2]) / 1e3,
                static_cast<double>(us[us.size() * 99 / 100]) / 1e3, us.size());
  };

  const auto direct_lat = latency(tx_direct, rx_direct, 2000);
  const auto [direct_n, direct_fps] = throughput(tx_direct, rx_direct, 400000);
  report("plain veth", direct_lat);
  std::printf("%-28s throughput: %.0f frames/s (%llu of 400000 delivered)\n", "plain veth",
              direct_fps, static_cast<unsigned long long>(direct_n));

  for (const char* policy : {"pass-through", "1% loss"}) {
    std::vector<std::string> extra = {"--no-log-pass", "--quiet"};
    if (std::string(policy) == "1% loss") {
      extra.push_back("--rule");
      extra.push_back(R"({"name":"loss1","type":"loss","p":0.01})");
    }
    ASSERT_TRUE(relay_.start(relay_args("", extra), dir_ + "/relay.out"));
    ASSERT_TRUE(wait_ready(dir_ + "/ctl.sock", 5000));
    const auto lat = latency(tx_relay, rx_relay, 2000);
    const auto [n, fps] = throughput(tx_relay, rx_relay, 400000);
    const auto stats =
        nlohmann::json::parse(ctl(dir_ + "/ctl.sock", "{\"cmd\":\"stats\"}"))["stats"];
    const double cpu_s = cpu_seconds(relay_.pid);
    ASSERT_EQ(relay_.stop(), 0);
    const std::string label = std::string("relay, ") + policy;
    report(label.c_str(), lat);
    std::printf(
        "%-28s throughput: %.0f frames/s (%llu of 400000 delivered; relay rx %llu, kernel drops "
        "%llu)\n",
        label.c_str(), fps, static_cast<unsigned long long>(n),
        static_cast<unsigned long long>(stats["relay"]["rx_frames"].get<uint64_t>()),
        static_cast<unsigned long long>(stats["relay"]["kernel_drops"].get<uint64_t>()));
    const double relay_rx = static_cast<double>(stats["relay"]["rx_frames"].get<uint64_t>());
    std::printf("%-28s relay CPU: %.2f s user+sys, %.2f us per received frame\n", label.c_str(),
                cpu_s, relay_rx > 0 ? cpu_s * 1e6 / relay_rx : 0.0);
    if (!lat.empty() && !direct_lat.empty()) {
      std::printf("%-28s added latency (median): %.1f us\n", label.c_str(),
                  (static_cast<double>(lat[lat.size() / 2]) -
                   static_cast<double>(direct_lat[direct_lat.size() / 2])) /
                      1e3);
    }
    // Every probe of the pass-through run arrives; B cannot receive more than the relay sent.
    if (std::string(policy) == "pass-through") {
      EXPECT_EQ(lat.size(), 2000u);
    }
    EXPECT_GT(n, 0u);
    EXPECT_LE(n, stats["relay"]["tx_frames"].get<uint64_t>() - lat.size());
  }
  close(tx_relay);
  close(rx_relay);
  close(tx_direct);
  close(rx_direct);
}

}  // namespace
}  // namespace mrc::faults
