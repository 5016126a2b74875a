// Integration tests on real kernels (root): two host namespaces over 1, 2 and 8 planes of veth
// links, a Linux router namespace per plane (topo.sh), plain IPv6 routing (STEV) and SRv6 uSID
// (End next-csid on the routers, End.DT6 on the hosts). The endpoints are forked children that
// enter the host namespaces and run endpoint_main. Every test removes its namespaces, also on
// failure, and checks that nothing of it is left.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "reference-impl/runtime/runtime.h"
#include "wire/wire.h"

namespace mrc::runtime {
namespace {

namespace fs = std::filesystem;

const std::string kTopo = std::string(MRC_SOURCE_DIR) + "/reference-impl/runtime/topo.sh";
const std::string kMrct = std::string(MRC_BIN_DIR) + "/mrct";
const std::string kCcVeth = std::string(MRC_SOURCE_DIR) + "/reference-impl/runtime/cc-veth.toml";

std::string sh(const std::string& cmd, int* rc = nullptr) {
  std::string out;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int st = pclose(p);
  if (rc) *rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool is_root() {
  return geteuid() == 0;
}

// Namespaces of runs that crashed before cleaning up (their pid is gone) are removed.
void remove_stale() {
  const std::string list = sh("ip netns list 2>/dev/null");
  std::istringstream in(list);
  std::string line;
  std::set<std::string> prefixes;
  while (std::getline(in, line)) {
    if (line.rfind("mrcrt", 0) != 0) continue;
    size_t k = 5;
    while (k < line.size() && isdigit(static_cast<unsigned char>(line[k]))) ++k;
    const std::string pid = line.substr(5, k - 5);
    if (!pid.empty() && !fs::exists("/proc/" + pid)) prefixes.insert(line.substr(0, k + 1));
  }
  for (const std::string& p : prefixes) sh("bash " + kTopo + " down " + p);
}

// The namespaces of one test; the destructor removes them.
class Topo {
 public:
  Topo(char tag, int planes, const std::string& mode) {
    prefix_ = "mrcrt" + std::to_string(getpid()) + std::string(1, tag);
    planes_ = planes;
    int rc = 0;
    const std::string out =
        sh("bash " + kTopo + " up " + prefix_ + " " + std::to_string(planes) + " " + mode, &rc);
    ok_ = rc == 0;
    if (!ok_) ADD_FAILURE() << "topo.sh up failed: " << out;
    dir_ = fs::temp_directory_path() / prefix_;
    fs::create_directories(dir_);
  }
  ~Topo() {
    // Every child of the test was reaped before this point: nothing may still run inside.
    const std::string procs =
        sh("for n in $(ip netns list 2>/dev/null | awk '{print $1}' | grep '^" + prefix_ +
           "'); do ip netns pids $n; done");
    EXPECT_TRUE(procs.empty()) << "processes left in the namespaces: " << procs;
    sh("bash " + kTopo + " down " + prefix_);
    const std::string left = sh("ip netns list 2>/dev/null | grep " + prefix_ + " || true");
    EXPECT_TRUE(left.empty()) << "namespaces left behind: " << left;
    if (!::testing::Test::HasFailure()) fs::remove_all(dir_);
  }
  bool ok() const { return ok_; }
  std::string ns(const std::string& n) const { return prefix_ + n; }
  std::string file(const std::string& name) const { return (dir_ / name).string(); }
  std::string ifaces(char side) const {
    std::string s;
    for (int p = 1; p <= planes_; ++p) {
      if (p > 1) s.push_back(',');
      s.push_back(side);
      s.append(std::to_string(p));
    }
    return s;
  }
  int planes() const { return planes_; }
  const std::string& prefix() const { return prefix_; }

 private:
  std::string prefix_;
  int planes_ = 0;
  bool ok_ = false;
  fs::path dir_;
};

// A child process in a namespace: endpoint_main(args) or exec(args).
class Child {
 public:
  Child(const std::string& netns, std::vector<std::string> args, const std::string& out_path,
        bool exec_program = false) {
    out_ = out_path;
    pid_ = fork();
    if (pid_ == 0) {
      const int nsfd = open(("/var/run/netns/" + netns).c_str(), O_RDONLY | O_CLOEXEC);
      if (nsfd < 0 || setns(nsfd, CLONE_NEWNET) != 0) _exit(120);
      const int fd = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd < 0) _exit(121);
      dup2(fd, 1);
      dup2(fd, 2);
      // The child runs endpoint_main without exec, so O_CLOEXEC closes nothing: any descriptor
      // the test process had open at the fork would live as long as the endpoint. A test thread
      // that was inside popen() at that moment (the carrier-cut thread polls rx_bytes) then
      // read its pipe until the endpoint exited, and its cut came after the transfer. Close all.
      close_range(3, ~0U, 0);
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      if (exec_program) {
        execvp(argv[0], argv.data());
        _exit(122);
      }
      const int rc = endpoint_main(static_cast<int>(args.size()), argv.data());
      fflush(stdout);
      fflush(stderr);
      _exit(rc);
    }
  }
  ~Child() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  // Exit code, or -1 (killed) after timeout.
  int wait(double timeout_s) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    for (;;) {
      int st = 0;
      const pid_t r = waitpid(pid_, &st, WNOHANG);
      if (r == pid_) {
        reaped_ = true;
        return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
      }
      if (std::chrono::steady_clock::now() > end) {
        kill(pid_, SIGKILL);
        waitpid(pid_, nullptr, 0);
        reaped_ = true;
        return -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  void signal(int sig) const { kill(pid_, sig); }
  std::string output() const { return read_file(out_); }

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  std::string out_;
};

struct RunResult {
  int server_rc = -1, client_rc = -1;
  std::string server_out, client_out;
  nlohmann::json client, server;  // --json results
};

// Server in host B, client in host A; both capture every port unless `capture` is false (a
// capture turns the kernel receive filter off).
RunResult transfer(const Topo& t, std::vector<std::string> common,
                   std::vector<std::string> client_extra = {},
                   std::vector<std::string> server_extra = {}, double timeout_s = 120,
                   bool capture = true,
                   const std::function<void(const Child& server)>& during = nullptr) {
  const std::string port = std::to_string(20000 + (getpid() % 20000));
  std::vector<std::string> s = {"endpoint", "server", "--ifaces",         t.ifaces('b'), "--port",
                                port,       "--json", "--accept-timeout", "30"};
  std::vector<std::string> c = {"endpoint", "client",   "--server",    "fd00:ff::b", "--port",
                                port,       "--ifaces", t.ifaces('a'), "--json"};
  if (capture) {
    s.insert(s.end(), {"--pcap", t.file("srv")});
    c.insert(c.end(), {"--pcap", t.file("cli")});
  }
  // The shipped profile file must give the same behaviour as the tool's default.
  common.insert(common.begin(), {"--cc-profile", kCcVeth});
  s.insert(s.end(), common.begin(), common.end());
  c.insert(c.end(), common.begin(), common.end());
  s.insert(s.end(), server_extra.begin(), server_extra.end());
  c.insert(c.end(), client_extra.begin(), client_extra.end());
  RunResult r;
  Child server(t.ns("b"), s, t.file("server.out"));
  Child client(t.ns("a"), c, t.file("client.out"));
  if (during) during(server);
  r.client_rc = client.wait(timeout_s);
  r.server_rc = server.wait(10);
  r.server_out = server.output();
  r.client_out = client.output();
  auto last_json = [](const std::string& out) {
    std::istringstream in(out);
    std::string line;
    nlohmann::json j;
    while (std::getline(in, line))
      if (!line.empty() && line[0] == '{') j = nlohmann::json::parse(line, nullptr, false);
    return j;
  };
  r.client = last_json(r.client_out);
  r.server = last_json(r.server_out);
  return r;
}

struct CaptureCheck {
  uint64_t frames = 0, roce = 0, icrc_checked = 0, bad_icrc = 0, data = 0, srv6 = 0;
};

CaptureCheck check_capture(const std::string& path) {
  CaptureCheck c;
  wire::CaptureReader r;
  EXPECT_TRUE(r.open(path)) << r.error();
  wire::CaptureRecord rec;
  wire::DecodeOptions opts;
  opts.verify_icrc = true;
  while (r.next(rec)) {
    ++c.frames;
    wire::DecodedFrame f;
    wire::decode_frame(rec.data, f, opts);
    EXPECT_FALSE(f.error) << path << " frame " << c.frames << ": " << f.error.describe();
    if (!f.roce) continue;
    ++c.roce;
    c.srv6 += f.has_inner_ip6;
    if (f.op && f.op->kind == wire::PacketKind::kMrcData) ++c.data;
    if (f.icrc_checked) {
      ++c.icrc_checked;
      c.bad_icrc += !f.icrc_ok;
    }
  }
  EXPECT_TRUE(r.error().empty()) << r.error();
  return c;
}

// Every capture of the run decodes, every ICRC verifies (in-process and with `mrct decode
// --strict` when the build has mrct).
void check_captures(const Topo& t, bool srv6, uint64_t* data_frames = nullptr) {
  uint64_t data = 0;
  for (const char* who : {"cli", "srv"}) {
    for (int p = 1; p <= t.planes(); ++p) {
      const std::string path = t.file(std::string(who) + "-" + (who[0] == 'c' ? "a" : "b") +
                                      std::to_string(p) + ".pcap");
      ASSERT_TRUE(fs::exists(path)) << path;
      CaptureCheck c = check_capture(path);
      EXPECT_GT(c.roce, 0u) << path;
      EXPECT_EQ(c.bad_icrc, 0u) << path;
      EXPECT_EQ(c.icrc_checked, c.roce) << path;
      if (srv6) {
        EXPECT_EQ(c.srv6, c.roce) << path;  // everything crossed the fabric encapsulated
      }
      if (who[0] == 's') data += c.data;
      if (fs::exists(kMrct)) {
        int rc = 0;
        const std::string out = sh(kMrct + " decode --strict " + path + " > /dev/null", &rc);
        EXPECT_EQ(rc, 0) << "mrct decode --strict " << path << ": " << out;
      }
    }
  }
  if (data_frames) *data_frames = data;
}

void expect_verified(const RunResult& r, uint64_t messages) {
  EXPECT_EQ(r.client_rc, 0) << r.client_out << "\n--- server ---\n" << r.server_out;
  EXPECT_EQ(r.server_rc, 0) << r.server_out;
  ASSERT_TRUE(r.client.is_object()) << r.client_out;
  ASSERT_TRUE(r.server.is_object()) << r.server_out;
  EXPECT_EQ(r.client["messages"], messages);
  EXPECT_EQ(r.server["verify"]["messages_checked"], messages);
  EXPECT_EQ(r.server["verify"]["messages_bad"], 0);
  EXPECT_EQ(r.client["error"], "");
}

class NetnsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!is_root()) GTEST_SKIP() << "needs root (network namespaces, AF_PACKET)";
    for (const char* tool : {"ip", "ethtool"}) {
      if (sh(std::string("command -v ") + tool).empty()) GTEST_SKIP() << tool << " not installed";
    }
    remove_stale();
  }
};

void stev_case(char tag, int planes, uint64_t iters, const std::string& size) {
  Topo t(tag, planes, "stev");
  ASSERT_TRUE(t.ok());
  RunResult r =
      transfer(t, {"--size", size, "--iters", std::to_string(iters), "--ev-format", "stev"});
  expect_verified(r, iters);
  check_captures(t, false);
}

TEST_F(NetnsTest, Stev1Plane) {
  stev_case('a', 1, 200, "64K");
}
TEST_F(NetnsTest, Stev2Planes) {
  stev_case('b', 2, 200, "64K");
}
TEST_F(NetnsTest, Stev8Planes) {
  stev_case('c', 8, 32, "1M");
}

void srv6_case(char tag, int planes, uint64_t iters, const std::string& size) {
  Topo t(tag, planes, "srv6");
  ASSERT_TRUE(t.ok());
  const std::string pa = t.file("ev-a.toml"), pb = t.file("ev-b.toml");
  int rc = 0;
  sh("bash " + kTopo + " evprofile " + std::to_string(planes) + " 2 a > " + pa, &rc);
  ASSERT_EQ(rc, 0);
  sh("bash " + kTopo + " evprofile " + std::to_string(planes) + " 2 b > " + pb, &rc);
  ASSERT_EQ(rc, 0);
  RunResult r =
      transfer(t, {"--size", size, "--iters", std::to_string(iters), "--ev-format", "srv6"},
               {"--ev-profile", pa}, {"--ev-profile", pb});
  expect_verified(r, iters);
  check_captures(t, true);
  // The routers shifted the uSID container: A sent fcbb:0:<p>100:<p>302::, B received
  // fcbb:0:<p>302::.
  wire::CaptureReader cap;
  ASSERT_TRUE(cap.open(t.file("srv-b1.pcap")));
  wire::CaptureRecord rec;
  bool saw_shifted = false;
  while (cap.next(rec)) {
    wire::DecodedFrame f;
    if (!wire::decode_frame(rec.data, f) || !f.has_inner_ip6) continue;
    if (f.inner_ip6.src == *wire::parse_ipv6("fd00:a::1")) {
      EXPECT_EQ(wire::format_ipv6(f.ip6.dst), "fcbb:0:1302::");
      EXPECT_EQ(f.ip6.hop_limit, 63);
      saw_shifted = true;
    }
  }
  EXPECT_TRUE(saw_shifted);
}

TEST_F(NetnsTest, Srv6Usid1Plane) {
  srv6_case('d', 1, 200, "64K");
}
TEST_F(NetnsTest, Srv6Usid2Planes) {
  srv6_case('e', 2, 200, "64K");
}
TEST_F(NetnsTest, Srv6Usid8Planes) {
  srv6_case('f', 8, 32, "1M");
}

// Per-packet source port and flow label reach the wire unchanged: a tcpdump on a router sees
// exactly what the client's capture says it sent.
TEST_F(NetnsTest, SourcePortAndFlowLabelSurviveTheRouter) {
  if (sh("command -v tcpdump").empty()) GTEST_SKIP() << "tcpdump not installed";
  Topo t('g', 2, "stev");
  ASSERT_TRUE(t.ok());
  const std::string dump = t.file("router1.pcap");
  Child td(t.ns("r1"),
           {"tcpdump", "-i", "ra", "-w", dump, "-U", "--immediate-mode", "-B", "65536", "udp",
            "dst", "port", "4791"},
           t.file("tcpdump.out"), true);
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  RunResult r = transfer(t, {"--size", "64K", "--iters", "100", "--evs", "32"});
  expect_verified(r, 100);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  td.signal(SIGINT);
  td.wait(10);
  // (psn, rtx) -> (sport, flow label) as the client sent them on plane 1.
  std::map<std::pair<uint32_t, bool>, std::pair<uint16_t, uint32_t>> sent;
  std::set<uint32_t> labels;
  wire::CaptureReader c;
  ASSERT_TRUE(c.open(t.file("cli-a1.pcap")));
  wire::CaptureRecord rec;
  while (c.next(rec)) {
    wire::DecodedFrame f;
    if (!wire::decode_frame(rec.data, f) || !f.roce || f.ip6.src != *wire::parse_ipv6("fd00:a::1"))
      continue;
    if (!f.op || f.op->kind != wire::PacketKind::kMrcData) continue;
    sent[{f.bth.psn, f.bth.rtx}] = {f.udp.sport, f.ip6.flow_label};
    labels.insert(f.ip6.flow_label);
  }
  EXPECT_GT(labels.size(), 4u) << "EVs should spread over many flow labels";
  wire::CaptureReader d;
  ASSERT_TRUE(d.open(dump)) << d.error() << td.output();
  uint64_t matched = 0;
  while (d.next(rec)) {
    wire::DecodedFrame f;
    wire::decode_frame(rec.data, f);
    if (!f.roce || !f.op || f.op->kind != wire::PacketKind::kMrcData) continue;
    auto it = sent.find({f.bth.psn, f.bth.rtx});
    ASSERT_NE(it, sent.end()) << "router saw PSN " << f.bth.psn << " the client never sent";
    EXPECT_EQ(f.udp.sport, it->second.first) << f.bth.psn;
    EXPECT_EQ(f.ip6.flow_label, it->second.second) << f.bth.psn;
    ++matched;
  }
  // tcpdump may lose frames to its own buffer on a loaded host; every frame it did see must
  // match, and it must have seen most.
  EXPECT_GE(matched * 10, sent.size() * 9) << td.output();
  EXPECT_GT(matched, 100u);
}

// --wire-profile: the endpoint speaks a variant (UDP 4971, EV[31:16] in the source port) end to
// end through the routers. Every MRC frame goes to 4971, and every SACK echoes a WEV the data
// packets carried under the high stripe.
TEST_F(NetnsTest, WireProfileVariantPortAndStripe) {
  const std::string path = std::string(MRC_SOURCE_DIR) + "/scenarios/profiles/wire-4971-high.toml";
  wire::WireParams p;
  std::string err;
  ASSERT_TRUE(wire::load_wire_params(path, p, err)) << err;
  const std::unique_ptr<wire::WireProfile> prof = wire::make_profile(p);
  Topo t('w', 2, "stev");
  ASSERT_TRUE(t.ok());
  RunResult r = transfer(t, {"--size", "64K", "--iters", "50", "--evs", "16", "--ev-format", "stev",
                             "--wire-profile", path});
  expect_verified(r, 50);
  std::set<uint32_t> sent_wevs, echoed;
  uint64_t mrc_frames = 0, other_port = 0;
  for (const char* cap : {"cli-a1.pcap", "cli-a2.pcap"}) {
    wire::CaptureReader c;
    ASSERT_TRUE(c.open(t.file(cap))) << c.error();
    wire::CaptureRecord rec;
    while (c.next(rec)) {
      wire::DecodedFrame f;
      wire::DecodeOptions any;
      any.roce_port = 4791;
      if (wire::decode_frame(rec.data, f, any, *prof) && f.roce) ++other_port;
      if (!wire::decode_frame(rec.data, f, {}, *prof) || !f.roce || !f.op) continue;
      ++mrc_frames;
      EXPECT_EQ(f.udp.dport, 4971);
      if (f.op->kind == wire::PacketKind::kMrcData)
        sent_wevs.insert(
            wire::wev_from_carriage(p, wire::EvFormat::kStev, f.udp.sport, f.ip6.flow_label));
      if (f.op->kind == wire::PacketKind::kMrcSack) echoed.insert(f.seth.entropy);
    }
  }
  EXPECT_GT(mrc_frames, 100u);
  EXPECT_EQ(other_port, 0u);
  ASSERT_FALSE(echoed.empty());
  for (uint32_t e : echoed) EXPECT_TRUE(sent_wevs.count(e)) << "SACK echoes 0x" << std::hex << e;
}

// Transmit through a PACKET_TX_RING of only 16 slots on one plane, so that it
// wraps hundreds of times; and through sendmmsg (--tx-ring 0) over 2 planes. Both verify end to
// end; the ring sends several frames per kick, sendmmsg up to 64 per call.
TEST_F(NetnsTest, TxRingSmallAndSendmmsg) {
  for (const char* ring : {"16", "0"}) {
    SCOPED_TRACE(std::string("--tx-ring ") + ring);
    Topo t(ring[0] == '0' ? 'u' : 't', ring[0] == '0' ? 2 : 1, "stev");
    ASSERT_TRUE(t.ok());
    RunResult r = transfer(t, {"--size", "64K", "--iters", "200", "--tx-ring", ring});
    expect_verified(r, 200);
    check_captures(t, false);
    ASSERT_TRUE(r.client.contains("loop")) << r.client.dump();
    uint64_t frames = 0;
    for (const nlohmann::json& p : r.client["ports"]) frames += p["tx_frames"].get<uint64_t>();
    const uint64_t syscalls = r.client["loop"]["tx_syscalls"].get<uint64_t>();
    EXPECT_GT(frames, 3200u);  // 200 x 64 KiB in 4 KiB frames at least
    EXPECT_GT(syscalls, 0u);
    EXPECT_LT(syscalls * 2, frames) << "fewer than 2 frames per transmit system call";
  }
}

// The kernel-socket back end: raw IPv6 transmit, UDP receive with the header rebuilt.
TEST_F(NetnsTest, SocketBackEnd) {
  Topo t('h', 2, "stev");
  ASSERT_TRUE(t.ok());
  RunResult r = transfer(t, {"--size", "64K", "--iters", "200", "--io", "socket"});
  expect_verified(r, 200);
  check_captures(t, false);
}

// The split back end (--io packet-tx): AF_PACKET transmit, UDP socket receive. Received frames
// are rebuilt from datagrams (rx_reconstructed counts every one; their source MAC is zero), and
// sent frames left through AF_PACKET with the plane's router as destination MAC (the socket back
// end's raw IPv6 transmit never writes a MAC: its captured frames keep the engine's zero).
TEST_F(NetnsTest, PacketTxBackEnd) {
  Topo t('m', 2, "stev");
  ASSERT_TRUE(t.ok());
  RunResult r = transfer(t, {"--size", "64K", "--iters", "200", "--io", "packet-tx"});
  expect_verified(r, 200);
  check_captures(t, false);
  for (const nlohmann::json* side : {&r.client, &r.server}) {
    const nlohmann::json& j = *side;
    ASSERT_TRUE(j.contains("ports")) << j.dump();
    for (const nlohmann::json& p : j["ports"]) {
      EXPECT_GT(p["rx_frames"].get<uint64_t>(), 0u) << p.dump();
      EXPECT_EQ(p["rx_reconstructed"], p["rx_frames"]) << p.dump();
      EXPECT_EQ(p["tx_no_next_hop"], 0) << p.dump();
    }
  }
  auto mac_of = [](const std::string& ns, const std::string& iface) {
    std::string m = sh("ip netns exec " + ns + " cat /sys/class/net/" + iface + "/address");
    while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
    return m;
  };
  auto mac_str = [](const std::byte* b) {
    char buf[18];
    std::snprintf(buf, sizeof buf, "%02x:%02x:%02x:%02x:%02x:%02x", static_cast<unsigned>(b[0]),
                  static_cast<unsigned>(b[1]), static_cast<unsigned>(b[2]),
                  static_cast<unsigned>(b[3]), static_cast<unsigned>(b[4]),
                  static_cast<unsigned>(b[5]));
    return std::string(buf);
  };
  for (int p = 1; p <= t.planes(); ++p) {
    const std::string own = mac_of(t.ns("a"), "a" + std::to_string(p));
    const std::string router = mac_of(t.ns("r" + std::to_string(p)), "ra");
    ASSERT_EQ(own.size(), 17u);
    ASSERT_EQ(router.size(), 17u);
    wire::CaptureReader c;
    ASSERT_TRUE(c.open(t.file("cli-a" + std::to_string(p) + ".pcap"))) << c.error();
    wire::CaptureRecord rec;
    uint64_t sent = 0, received = 0;
    while (c.next(rec)) {
      ASSERT_GE(rec.data.size(), 14u);
      const std::string dst = mac_str(rec.data.data()), src = mac_str(rec.data.data() + 6);
      if (src == own) {
        ++sent;
        EXPECT_EQ(dst, router) << "plane " << p << " frame " << sent + received;
      } else {
        ++received;
        EXPECT_EQ(src, "00:00:00:00:00:00") << "plane " << p << ": a received frame kept a MAC";
      }
    }
    EXPECT_GT(sent, 0u) << "plane " << p;
    EXPECT_GT(received, 0u) << "plane " << p;
  }
}

// Threaded NAPI receive on every veth of the path (topo.sh napi, bench_runtime.sh --napi): the
// routers forward and the hosts' AF_PACKET rings are filled from NAPI threads instead of the
// sender's system call. The transfer verifies over it, and `off` turns it back.
TEST_F(NetnsTest, ThreadedNapiVeths) {
  Topo t('n', 2, "stev");
  ASSERT_TRUE(t.ok());
  auto threaded = [&](const std::string& ns, const std::string& iface) {
    std::string v = sh("ip netns exec " + t.ns(ns) + " cat /sys/class/net/" + iface + "/threaded");
    while (!v.empty() && (v.back() == '\n' || v.back() == ' ')) v.pop_back();
    return v;
  };
  int rc = 0;
  std::string out = sh("bash " + kTopo + " napi " + t.prefix() + " 2 all", &rc);
  ASSERT_EQ(rc, 0) << out;
  for (int p = 1; p <= 2; ++p) {
    const std::string x = std::to_string(p);
    EXPECT_EQ(threaded("r" + x, "ra"), "1") << "plane " << p;
    EXPECT_EQ(threaded("r" + x, "rb"), "1") << "plane " << p;
    EXPECT_EQ(threaded("a", "a" + x), "1") << "plane " << p;
    EXPECT_EQ(threaded("b", "b" + x), "1") << "plane " << p;
  }
  RunResult r = transfer(t, {"--size", "64K", "--iters", "200"});
  expect_verified(r, 200);
  check_captures(t, false);
  out = sh("bash " + kTopo + " napi " + t.prefix() + " 2 off", &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(threaded("r1", "ra"), "0");
  EXPECT_EQ(threaded("b", "b2"), "0");
  out = sh("bash " + kTopo + " napi " + t.prefix() + " 2 fast", &rc);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("napi mode must be off, router or all"), std::string::npos) << out;
}

// --ack-every: the responder sends one coalesced SACK per that many bytes (plus one for every
// message's last packet, whose A bit asks for it) instead of the engine's one per 16 KiB. With
// 1 MiB messages of 4 KiB frames: 64 SACKs per message by default, 16 with --ack-every 64K.
TEST_F(NetnsTest, AckEveryCoalescesSacks) {
  Topo t('p', 1, "stev");
  ASSERT_TRUE(t.ok());
  const uint64_t iters = 20;
  RunResult r = transfer(t, {"--size", "1M", "--iters", std::to_string(iters), "--pmtu", "4096"},
                         {}, {"--ack-every", "64K"});
  expect_verified(r, iters);
  ASSERT_TRUE(r.server.contains("ports")) << r.server_out;
  const uint64_t server_frames = r.server["ports"][0]["tx_frames"].get<uint64_t>();
  const uint64_t data_frames = r.client["ports"][0]["tx_frames"].get<uint64_t>();
  EXPECT_GE(data_frames, iters * 256) << r.client_out;
  EXPECT_GE(server_frames, iters * 16) << r.server_out;  // one per 64 KiB at least
  // Well below the default's 64 per message (probes and endpoint responses add a few).
  EXPECT_LT(server_frames, iters * 32) << r.server_out;
  Child bad(
      t.ns("a"),
      {"endpoint", "client", "--server", "fd00:ff::b", "--ifaces", "a1", "--ack-every", "512"},
      t.file("bad.out"));
  EXPECT_EQ(bad.wait(30), 2);
  EXPECT_NE(bad.output().find("--ack-every '512'"), std::string::npos) << bad.output();
}

// Receive coalescing: while frames stream in, the server's loop sleeps a fixed time after each
// batch instead of in epoll_wait (where every arriving frame would wake it, at the sender's
// expense). 1 ms, so that even on a loaded host each sleep finds the 4 frames that keep it
// coalescing; with --rx-coalesce-us 0 it never sleeps that way.
TEST_F(NetnsTest, RxCoalescingSleepsWhileFramesStream) {
  Topo t('q', 1, "stev");
  ASSERT_TRUE(t.ok());
  const uint64_t iters = 32;
  RunResult r = transfer(t, {"--size", "1M", "--iters", std::to_string(iters)}, {},
                         {"--rx-coalesce-us", "1000"});
  expect_verified(r, iters);
  ASSERT_TRUE(r.server.contains("loop")) << r.server_out;
  const uint64_t sleeps = r.server["loop"]["rx_coalesce_sleeps"].get<uint64_t>();
  const uint64_t waits = r.server["loop"]["epoll_waits"].get<uint64_t>();
  // 8,192 data frames, taken in batches: woken by each frame, the server found about 5 per
  // sleep (1,643 epoll_waits, no coalescing sleep, in a run with coalescing disabled), coalescing
  // about 60 (132 sleeps of either kind; a sleep also ends at the engine's next deadline).
  EXPECT_GT(sleeps, 0u) << r.server_out;
  EXPECT_GT(r.server["ports"][0]["rx_frames"].get<uint64_t>(), 12 * (sleeps + waits))
      << r.server_out;

  RunResult off = transfer(t, {"--size", "1M", "--iters", "4", "--rx-coalesce-us", "0"});
  expect_verified(off, 4);
  EXPECT_EQ(off.server["loop"]["rx_coalesce_sleeps"].get<uint64_t>(), 0u) << off.server_out;
  EXPECT_EQ(off.client["loop"]["rx_coalesce_sleeps"].get<uint64_t>(), 0u) << off.client_out;
}

// A host that does not run the loop: the server is stopped (SIGSTOP) for 300 ms in the middle
// of a transfer while frames keep arriving in its ring. Its JSON says how late it read them
// (loop.rx_late_max_ns, from the ring's arrival stamps), which is what mrct run reports and
// mrct suite's one retry keys on; an endpoint that never stalls stays well below it.
// The client's own frames need not arrive early in the stop (a client whose window is full sends
// only probes), so the test itself sends one UDP datagram to port 4791 (which the ring takes and
// the engine refuses) once the server is stopped, and counts the 300 ms from when it was sent.
// A CI run reported 138 ms: the loop measured against the clock it read before the pass, and a
// stop in the middle of a pass has frames that arrived during the stop read with a clock from
// before it. With the client stopped too, that gave 11-17 ms in 2 of 6 runs; it is measured
// after the pass now.
TEST_F(NetnsTest, StalledLoopReportsHowLateItReadTheRing) {
  Topo t('s', 1, "stev");
  ASSERT_TRUE(t.ok());
  // The stop must fall in the transfer, which starts a second or two after the processes do
  // (control channel, registration, next hops): wait for the server to have received 8 MB.
  const std::string rx =
      "ip netns exec " + t.ns("b") + " cat /sys/class/net/b1/statistics/rx_bytes";
  bool stopped = false;
  // The scenarios' ACK timeout (--timeout 14: 16.8 ms) and probe interval: a client whose window
  // is full sends nothing but probes while the server is stopped, and by default (--timeout 18,
  // 268 ms) its first would come at the end of the stop.
  RunResult r = transfer(
      t, {"--size", "1M", "--duration", "3", "--probe-interval-us", "1000", "--timeout", "14"}, {},
      {}, 120, true, [&](const Child& server) {
        for (int i = 0; i < 2000 && std::atoll(sh(rx).c_str()) < (8 << 20); ++i)
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        server.signal(SIGSTOP);
        stopped = true;
        sh("ip netns exec " + t.ns("a") + " bash -c 'echo late >/dev/udp/fd00:a::2/4791'");
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        server.signal(SIGCONT);
      });
  ASSERT_TRUE(stopped);
  ASSERT_EQ(r.client_rc, 0) << r.client_out;
  ASSERT_EQ(r.server_rc, 0) << r.server_out;
  ASSERT_TRUE(r.server.contains("loop")) << r.server_out;
  EXPECT_GE(r.server["loop"]["rx_late_max_ns"].get<uint64_t>(), 200'000'000u) << r.server_out;
  EXPECT_GE(r.server["loop"]["rx_late_over_20ms"].get<uint64_t>(), 1u) << r.server_out;
  // The datagram was read (and refused).
  EXPECT_GE(r.server["engine"]["rx_decode_errors"].get<uint64_t>(), 1u) << r.server_out;
  EXPECT_LT(r.server["loop"]["rx_late_max_ns"].get<uint64_t>(), 10'000'000'000u) << r.server_out;
}

// One counter of a namespace's /proc/net/snmp6 (0 when absent).
uint64_t snmp6(const Topo& t, const std::string& host, const std::string& name) {
  const std::string v =
      sh("ip netns exec " + t.ns(host) + " awk '$1==\"" + name + "\"{print $2}' /proc/net/snmp6");
  return v.empty() ? 0 : std::stoull(v);
}

// The tap receive (RuntimeConfig::rx_tap): the rings take the frames before tc ingress and the
// ingress sink ends them there, so that neither host's IPv6 stack receives the data frames or
// the SACKs (each of which used to go through the IPv6 and UDP receive up to the sink socket's
// drop-all filter: Udp6InErrors). Without a capture, so that the receive filter runs too (on
// the rings). With --no-rx-tap every RoCE frame reaches the stack again, which shows that the
// counters read here count them.
TEST_F(NetnsTest, TapRingsKeepRoceFramesFromTheIpv6Stack) {
  Topo t('t', 1, "stev");
  ASSERT_TRUE(t.ok());
  const uint64_t iters = 16;
  struct Counters {
    uint64_t in_receives, udp_errors;
  };
  const auto read = [&](const std::string& host) {
    return Counters{snmp6(t, host, "Ip6InReceives"), snmp6(t, host, "Udp6InErrors")};
  };
  for (const bool tap : {true, false}) {
    SCOPED_TRACE(tap ? "tap" : "--no-rx-tap");
    const Counters a0 = read("a"), b0 = read("b");
    std::vector<std::string> common = {"--size", "1M", "--iters", std::to_string(iters)};
    if (!tap) common.push_back("--no-rx-tap");
    RunResult r = transfer(t, common, {}, {}, 120, false);
    expect_verified(r, iters);
    const Counters a1 = read("a"), b1 = read("b");
    ASSERT_TRUE(r.server.contains("ports")) << r.server_out;
    EXPECT_EQ(r.server["rx_tap"], tap) << r.server_out;
    EXPECT_EQ(r.client["rx_tap"], tap) << r.client_out;
    EXPECT_EQ(r.server["rx_filter"]["at"], tap ? "tap" : "tc-ingress") << r.server_out;
    const uint64_t server_rx = r.server["ports"][0]["rx_frames"].get<uint64_t>();
    const uint64_t client_rx = r.client["ports"][0]["rx_frames"].get<uint64_t>();
    EXPECT_GE(server_rx, iters * 256) << r.server_out;  // 1 MiB in frames of 4 KiB at most
    EXPECT_GT(client_rx, iters) << r.client_out;        // SACKs, at least one per message
    if (tap) {
      // What is left is the TCP control channel and neighbour discovery.
      EXPECT_EQ(b1.udp_errors - b0.udp_errors, 0u);
      EXPECT_EQ(a1.udp_errors - a0.udp_errors, 0u);
      EXPECT_LT(b1.in_receives - b0.in_receives, server_rx / 10);
      EXPECT_LT(a1.in_receives - a0.in_receives, client_rx / 2);
    } else {
      EXPECT_GE(b1.udp_errors - b0.udp_errors, server_rx);
      EXPECT_GE(a1.udp_errors - a0.udp_errors, client_rx);
    }
  }
}

// Loss on one plane from an nft rule in its router: the transfer completes, the engine
// retransmits, the data verifies.
TEST_F(NetnsTest, LossOnOnePlane) {
  if (sh("command -v nft").empty()) GTEST_SKIP() << "nft not installed";
  Topo t('i', 2, "stev");
  ASSERT_TRUE(t.ok());
  const std::string rules = t.file("loss.nft");
  {
    std::ofstream f(rules);
    f << "table inet mrcrt {\n  chain loss {\n    type filter hook forward priority 0;\n"
         "    udp dport 4791 numgen random mod 100 < 2 counter drop\n  }\n}\n";
  }
  int rc = 0;
  const std::string out = sh("ip netns exec " + t.ns("r1") + " nft -f " + rules, &rc);
  ASSERT_EQ(rc, 0) << out;
  RunResult r = transfer(t, {"--size", "64K", "--iters", "400"});
  expect_verified(r, 400);
  EXPECT_GT(r.client["retransmissions"]["total"].get<uint64_t>(), 0u) << r.client_out;
  const std::string counters = sh("ip netns exec " + t.ns("r1") + " nft list ruleset");
  EXPECT_NE(counters.find("drop"), std::string::npos);
}

// Unreachable peers: no server on the control port (setup error, exit 2), and a data path
// that forwards nothing (the QP exhausts its retries, exit 1) — both with a message.
TEST_F(NetnsTest, UnreachablePeers) {
  Topo t('j', 1, "stev");
  ASSERT_TRUE(t.ok());
  Child lonely(t.ns("a"),
               {"endpoint", "client", "--server", "fd00:ff::b", "--port", "20999", "--ifaces", "a1",
                "--ctl-timeout", "1"},
               t.file("lonely.out"));
  EXPECT_EQ(lonely.wait(20), 2);
  EXPECT_NE(lonely.output().find("cannot reach the server's control port"), std::string::npos)
      << lonely.output();

  sh("ip netns exec " + t.ns("r1") + " sysctl -qw net.ipv6.conf.all.forwarding=0");
  RunResult r = transfer(t, {"--size", "4K", "--iters", "10", "--timeout", "10", "--retry", "2:2"},
                         {}, {}, 60);
  EXPECT_EQ(r.client_rc, 1) << r.client_out;
  EXPECT_NE(r.client_out.find("RETRY_EXC"), std::string::npos) << r.client_out;
}

// No control answer that comes within --ctl-timeout waits on bulk memory work (issue 20:
// all-paths-down failed under load when the client filled its 2 GiB buffer between the server's
// `welcome` and its own `qps`, past the server's 10 s; the server's buffer was populated between
// `hello` and `welcome`, which the client also gave only --ctl-timeout). Here --ctl-timeout is
// 0.5 s, the client fills 2 GiB and the server's buffer is 1 GiB: seconds of work on this host
// (populating 2 GiB took 14 s under load), microseconds for the handshake's own steps. Main's
// binary with these arguments fails both ways ("no answer ... within the timeout"). Two QPs and
// fewer slots on the server than the client allocated: the client's second QP still sends from
// where its buffer put it (the server verifies every slot).
TEST_F(NetnsTest, BufferPreparationIsOutsideTheControlTimeouts) {
  Topo t('m', 1, "stev");
  ASSERT_TRUE(t.ok());
  RunResult r = transfer(t,
                         {"--size", "1M", "--duration", "0.3", "--tx-depth", "8", "--qps", "2",
                          "--ctl-timeout", "0.5"},
                         {"--buffer-limit", "2G"}, {"--buffer-limit", "1G"}, 300);
  EXPECT_EQ(r.client_rc, 0) << r.client_out << "\n--- server ---\n" << r.server_out;
  EXPECT_EQ(r.server_rc, 0) << r.server_out;
  ASSERT_TRUE(r.client.is_object()) << r.client_out;
  ASSERT_TRUE(r.server.is_object()) << r.server_out;
  EXPECT_GT(r.client["messages"].get<uint64_t>(), 2u);
  EXPECT_EQ(r.server["verify"]["messages_checked"], r.client["messages"]);
  EXPECT_EQ(r.server["verify"]["messages_bad"], 0) << r.server_out;
}

// Port status from carrier: plane 2's router goes away mid-transfer (both its links down, as
// when a plane's switch fails), so a2 and b2 lose carrier. Both runtimes see it, the engines
// log port_status and stop using port 2, and the transfer completes over plane 1 with the data
// verified instead of stalling on a port that cannot send.
TEST_F(NetnsTest, PlaneLosesCarrierMidTransfer) {
  Topo t('l', 2, "stev");
  ASSERT_TRUE(t.ok());
  const std::string cli_log = t.file("cli.events.jsonl"), srv_log = t.file("srv.events.jsonl");
  const auto start = std::chrono::steady_clock::now();
  double first_mb_s = -1, cut_s = -1;
  std::thread cut([&] {
    // Mid-transfer: the client runs for 6 s; cut 0.5 s after B received its first MB on plane
    // 2, or at 2.5 s if plane 2 has not carried a MB by then. (With 4 s and 1 s, a run next to
    // other tests on 2 busy cores once saw that MB only after 3 s, and the cut came after the
    // transfer; a clean-clone CI run once saw it only at the transfer's end, 6.4 s, so the
    // wait is bounded well inside the transfer: the cut must never depend on machine speed.)
    const auto end = start + std::chrono::milliseconds(2500);
    const std::string rx =
        "ip netns exec " + t.ns("b") + " cat /sys/class/net/b2/statistics/rx_bytes";
    while (std::chrono::steady_clock::now() < end && std::atoll(sh(rx).c_str()) < (1 << 20))
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    first_mb_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    sh("ip netns exec " + t.ns("r2") + " ip link set ra down");
    sh("ip netns exec " + t.ns("r2") + " ip link set rb down");
    cut_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  });
  RunResult r = transfer(t, {"--size", "64K", "--duration", "6", "--buffer-limit", "32M"},
                         {"--event-log", cli_log}, {"--event-log", srv_log});
  const double done_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  cut.join();
  // Said with every failure below: when plane 2 had carried its first MB, when it was cut, and
  // when the transfer ended (all seconds after the start).
  SCOPED_TRACE("plane 2's first MB at " + std::to_string(first_mb_s) + " s, cut at " +
               std::to_string(cut_s) + " s, transfer done at " + std::to_string(done_s) + " s");
  EXPECT_EQ(r.client_rc, 0) << r.client_out << "\n--- server ---\n" << r.server_out;
  EXPECT_EQ(r.server_rc, 0) << r.server_out;
  ASSERT_TRUE(r.client.is_object()) << r.client_out;
  ASSERT_TRUE(r.server.is_object()) << r.server_out;
  EXPECT_EQ(r.client["error"], "");
  EXPECT_GT(r.client["messages"].get<uint64_t>(), 512u);
  EXPECT_EQ(r.server["verify"]["messages_bad"], 0);
  EXPECT_EQ(r.server["verify"]["messages_checked"], 512);  // the last message of every slot
  for (const nlohmann::json* j : {&r.client, &r.server}) {
    ASSERT_EQ((*j)["ports"].size(), 2u);
    EXPECT_EQ((*j)["ports"][0]["up"], true);
    EXPECT_EQ((*j)["ports"][1]["up"], false);
    EXPECT_GE((*j)["ports"][1]["carrier_lost"].get<uint64_t>(), 1u);
  }
  // Each side logged its own port going down (scope local) and heard about the peer's.
  for (const std::string& log : {cli_log, srv_log}) {
    std::istringstream in(read_file(log));
    std::string line;
    int local_down = 0, peer = 0;
    while (std::getline(in, line)) {
      nlohmann::json e = nlohmann::json::parse(line, nullptr, false);
      if (!e.is_object() || e.value("kind", "") != "port_status") continue;
      if (e.value("scope", "") == "local" && e.value("port", 0) == 2 && e.value("up", 1) == 0)
        ++local_down;
      else if (e.value("scope", "") != "local")
        ++peer;
    }
    EXPECT_EQ(local_down, 1) << log;
    EXPECT_GE(peer, 1) << log;
  }
  // The runtime samples bytes in flight (and cwnd) into the event log while they change, so the
  // viewer can draw them for a real run (issue 18: no cwnd event at a steady window).
  {
    std::istringstream in(read_file(cli_log));
    std::string line;
    int samples = 0, in_flight = 0;
    while (std::getline(in, line)) {
      nlohmann::json e = nlohmann::json::parse(line, nullptr, false);
      if (!e.is_object() || e.value("kind", "") != "cwnd" || e.value("reason", "") != "sample")
        continue;
      ++samples;
      in_flight += e.value("bytes_in_flight", uint64_t{0}) > 0;
    }
    EXPECT_GE(samples, 10) << cli_log;
    EXPECT_GE(in_flight, 5) << cli_log;
  }
  // Data kept flowing on plane 1 after the cut: the client's plane-1 capture spans past it.
  CaptureCheck c1 = check_capture(t.file("cli-a1.pcap"));
  EXPECT_GT(c1.data, 0u);
}

// The endpoint children are forked, not exec'd: they must not keep the test process's
// descriptors. PlaneLosesCarrierMidTransfer once cut its plane after the transfer had ended,
// because its polling thread's popen() pipe lived on in the client and the read never returned.
TEST_F(NetnsTest, EndpointChildHoldsNoDescriptorOfTheTest) {
  Topo t('q', 1, "stev");
  ASSERT_TRUE(t.ok());
  int fds[2];
  ASSERT_EQ(pipe2(fds, O_CLOEXEC), 0);
  Child server(
      t.ns("b"),
      {"endpoint", "server", "--ifaces", t.ifaces('b'), "--port", "20999", "--accept-timeout", "5"},
      t.file("server.out"));
  close(fds[1]);
  pollfd p{fds[0], POLLIN, 0};
  const int n = poll(&p, 1, 1500);
  EXPECT_EQ(n, 1) << "the endpoint child still holds the write end of the test's pipe";
  char c;
  if (n == 1) {
    EXPECT_EQ(read(fds[0], &c, 1), 0);
  }
  close(fds[0]);
  server.signal(SIGTERM);
  server.wait(10);
}

// A mutant on the wire: the peer's capture shows the violation, the transfer still completes.
TEST_F(NetnsTest, WrongIcrcMutantShowsOnTheWire) {
  Topo t('k', 1, "stev");
  ASSERT_TRUE(t.ok());
  RunResult r = transfer(t, {"--size", "64K", "--iters", "100"}, {"--mutant", "wrong-icrc"});
  expect_verified(r, 100);
  CaptureCheck c = check_capture(t.file("srv-b1.pcap"));
  EXPECT_GT(c.bad_icrc, 0u);
  EXPECT_GT(r.server["engine"]["rx_bad_icrc"].get<uint64_t>(), 0u);
  EXPECT_GT(r.client["retransmissions"]["total"].get<uint64_t>(), 0u);
  // Every drop reason is in the result, and the seed it ran with.
  for (const char* k :
       {"rx_decode_errors", "rx_not_roce", "rx_not_for_us", "rx_unknown_qp", "rx_wrong_state",
        "rx_unexpected", "rx_bad_port", "ctrl_queue_drops", "ep_requests_rx", "ep_responses_rx",
        "port_status_rejected", "port_status_unknown_peer", "ep_responses_limited",
        "drop_events_suppressed"})
    EXPECT_TRUE(r.server["engine"].contains(k)) << k;
  for (const char* k :
       {"stale_rx", "fatal_rejected", "out_of_window_rx", "remote_access_errors",
        "invalid_requests", "error_naks_sent", "error_naks_limited", "replies_limited"})
    EXPECT_TRUE(r.server["refused"].contains(k)) << k;
  EXPECT_TRUE(r.server.contains("seed"));
  EXPECT_NE(r.client_out.find("TEST-ONLY MUTANT"), std::string::npos);
}

}  // namespace
}  // namespace mrc::runtime
