// The injector's command line: run (the relay), check (validate a config), replay (the policy
// over a capture, offline), ctl (talk to a running relay).
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "fault-injector/faults.h"

namespace mrc::faults {

namespace {

constexpr int kExitOk = 0;
constexpr int kExitRuntime = 1;
constexpr int kExitUsage = 2;

struct Common {
  std::string config_path;
  std::vector<std::string> link_specs;
  std::vector<std::string> rule_jsons;
  std::optional<uint64_t> seed;
  std::string log_path;
  bool no_log_pass = false;
  std::string control_path;
  std::string profile;
};

void add_common(CLI::App& app, Common& c, bool with_links) {
  app.add_option("-c,--config", c.config_path,
                 "Config file (TOML or JSON; see fault-injector/README.md)");
  if (with_links)
    app.add_option("--link", c.link_specs,
                   "Impaired link NAME:IFACE_A:IFACE_B[:PLANE] (repeatable; adds to the config)");
  app.add_option("--rule", c.rule_jsons,
                 "A rule as JSON, e.g. '{\"type\":\"loss\",\"p\":0.01}' (repeatable; after the "
                 "config's rules)");
  app.add_option("--seed", c.seed, "PRNG seed (overrides the config)");
  app.add_option("--log", c.log_path,
                 "Decision log, JSON lines ('-' = stdout; overrides the config)");
  app.add_flag("--no-log-pass", c.no_log_pass, "Log only frames that were dropped/changed/delayed");
  app.add_option("--profile", c.profile,
                 "Wire profile: MRP0 or a profile file (TOML, docs/wire-format.md section 19)");
}

// Config file + command line additions. Returns false after printing the error.
bool build_config(const Common& c, InjectorConfig& cfg) {
  std::string err;
  if (!c.config_path.empty() && !load_config(c.config_path, cfg, &err)) {
    std::cerr << "mrc-inject: " << err << "\n";
    return false;
  }
  for (const std::string& spec : c.link_specs) {
    std::vector<std::string> parts;
    size_t start = 0;
    for (;;) {
      const size_t colon = spec.find(':', start);
      parts.push_back(
          spec.substr(start, colon == std::string::npos ? std::string::npos : colon - start));
      if (colon == std::string::npos) break;
      start = colon + 1;
    }
    if (parts.size() < 3 || parts.size() > 4 || parts[0].empty() || parts[1].empty() ||
        parts[2].empty()) {
      std::cerr << "mrc-inject: --link '" << spec << "': expected NAME:IFACE_A:IFACE_B[:PLANE]\n";
      return false;
    }
    LinkInfo li;
    li.name = parts[0];
    li.iface_a = parts[1];
    li.iface_b = parts[2];
    if (parts.size() == 4) {
      char* end = nullptr;
      const long p = std::strtol(parts[3].c_str(), &end, 10);
      if (parts[3].empty() || *end != '\0' || p < 0 || p > 255) {
        std::cerr << "mrc-inject: --link '" << spec << "': PLANE must be 0..255\n";
        return false;
      }
      li.plane = static_cast<int>(p);
    }
    for (const LinkInfo& o : cfg.policy.links)
      if (o.name == li.name) {
        std::cerr << "mrc-inject: --link '" << spec << "': link '" << li.name
                  << "' already defined\n";
        return false;
      }
    cfg.policy.links.push_back(li);
  }
  for (size_t i = 0; i < c.rule_jsons.size(); ++i) {
    Rule r;
    if (!parse_rule_json(c.rule_jsons[i], r, &err)) {
      std::cerr << "mrc-inject: --rule #" << (i + 1) << ": " << err << "\n";
      return false;
    }
    if (r.name.empty()) r.name = "cli" + std::to_string(i + 1);
    cfg.policy.rules.push_back(std::move(r));
  }
  if (c.seed) cfg.policy.seed = *c.seed;
  if (!c.log_path.empty()) cfg.log_path = c.log_path;
  if (c.no_log_pass) cfg.log_pass = false;
  if (!c.control_path.empty()) cfg.control_path = c.control_path;
  if (!c.profile.empty()) cfg.profile = c.profile;
  if (!wire::find_profile(cfg.profile)) {
    // A profile file: loaded and registered under its name, which the relay then looks up.
    std::string why;
    std::unique_ptr<wire::WireProfile> wp = wire::open_wire_profile(cfg.profile, why);
    if (!wp) {
      std::cerr << "mrc-inject: --profile: " << why << "\n";
      return false;
    }
    cfg.profile = std::string(wp->name());
    wire::register_profile(std::move(wp));
  }
  // Names, link references and rule validity, as the policy will see them.
  try {
    if (cfg.policy.links.empty()) {
      PolicyConfig probe = cfg.policy;
      probe.links.push_back(LinkInfo{"_", -1, "", "", "", ""});
      Policy p(probe, 0);
    } else {
      Policy p(cfg.policy, 0);
    }
  } catch (const std::exception& e) {
    std::cerr << "mrc-inject: " << e.what() << "\n";
    return false;
  }
  return true;
}

int cmd_run(const Common& c, const std::string& pcap_dir, const std::string& node,
            double duration_s, size_t batch, bool quiet) {
  InjectorConfig cfg;
  if (!build_config(c, cfg)) return kExitUsage;
  if (cfg.policy.links.empty()) {
    std::cerr
        << "mrc-inject: no links: give [[link]] in the config or --link NAME:IFACE_A:IFACE_B\n";
    return kExitUsage;
  }
  if (!pcap_dir.empty()) {
    for (LinkInfo& li : cfg.policy.links) {
      if (li.pcap_a.empty()) li.pcap_a = pcap_dir + "/" + node + "-" + li.iface_a + ".pcap";
      if (li.pcap_b.empty()) li.pcap_b = pcap_dir + "/" + node + "-" + li.iface_b + ".pcap";
    }
  }
  RelayOptions opt;
  opt.config = cfg;
  opt.duration_ns = duration_s > 0 ? static_cast<uint64_t>(duration_s * 1e9) : 0;
  opt.batch = batch;
  opt.quiet = quiet;
  Relay relay(opt);
  std::string err;
  if (!relay.open(&err)) {
    std::cerr << "mrc-inject: " << err << "\n";
    return kExitRuntime;
  }
  if (!quiet) {
    std::cerr << "mrc-inject: relaying";
    for (const LinkInfo& li : cfg.policy.links)
      std::cerr << " " << li.name << " (" << li.iface_a << " <-> " << li.iface_b << ")";
    std::cerr << ", " << cfg.policy.rules.size() << " rule(s), seed " << cfg.policy.seed;
    if (!cfg.control_path.empty()) std::cerr << ", control " << cfg.control_path;
    std::cerr << std::endl;
  }
  return relay.run() == 0 ? kExitOk : kExitRuntime;
}

int cmd_check(const Common& c) {
  InjectorConfig cfg;
  if (!build_config(c, cfg)) return kExitUsage;
  nlohmann::json j;
  j["seed"] = cfg.policy.seed;
  j["links"] = nlohmann::json::array();
  for (const LinkInfo& li : cfg.policy.links)
    j["links"].push_back(
        {{"name", li.name}, {"a", li.iface_a}, {"b", li.iface_b}, {"plane", li.plane}});
  j["rules"] = nlohmann::json::array();
  for (const Rule& r : cfg.policy.rules)
    j["rules"].push_back(nlohmann::json::parse(rule_to_json(r)));
  std::cout << j.dump(2) << "\n";
  return kExitOk;
}

int cmd_replay(const Common& c, const std::string& in_path, const std::string& out_path,
               const std::string& dir_s, const std::string& link_name) {
  InjectorConfig cfg;
  if (!build_config(c, cfg)) return kExitUsage;
  if (cfg.policy.links.empty()) cfg.policy.links.push_back(LinkInfo{"replay", -1, "", "", "", ""});
  auto dir = parse_direction(dir_s);
  if (!dir) {
    std::cerr << "mrc-inject: --dir must be ab or ba\n";
    return kExitUsage;
  }
  uint32_t link = 0;
  if (!link_name.empty()) {
    auto it = std::find_if(cfg.policy.links.begin(), cfg.policy.links.end(),
                           [&](const LinkInfo& l) { return l.name == link_name; });
    if (it == cfg.policy.links.end()) {
      std::cerr << "mrc-inject: --link-name '" << link_name << "': no such link\n";
      return kExitUsage;
    }
    link = static_cast<uint32_t>(it - cfg.policy.links.begin());
  }
  wire::CaptureReader reader;
  if (!reader.open(in_path)) {
    std::cerr << "mrc-inject: " << reader.error() << "\n";
    return kExitUsage;
  }
  const wire::WireProfile* profile = wire::find_profile(cfg.profile);
  std::unique_ptr<Policy> policy;
  DecisionLog log;
  std::string err;
  if (!cfg.log_path.empty() && !log.open(cfg.log_path, cfg.log_pass, &err)) {
    std::cerr << "mrc-inject: " << err << "\n";
    return kExitRuntime;
  }
  struct Out {
    uint64_t t_ns;
    uint64_t seq;
    std::vector<std::byte> bytes;
  };
  std::vector<Out> out;
  wire::CaptureRecord rec;
  uint64_t seq = 0;
  while (reader.next(rec)) {
    if (rec.link != wire::LinkType::kEthernet) {
      std::cerr << "mrc-inject: " << in_path << ": record " << reader.records_read()
                << " is not Ethernet; the injector works on Ethernet frames\n";
      return kExitUsage;
    }
    // Windows and flap schedules count from the first frame of the capture.
    if (!policy) policy = std::make_unique<Policy>(cfg.policy, rec.ts_ns, *profile);
    const Decision& d = policy->on_frame(rec.data, *dir, link, rec.ts_ns);
    if (log.is_open()) log.write(d, *policy);
    if (d.action == Action::kDrop) continue;
    for (uint32_t i = 0; i <= d.copies; ++i)
      out.push_back(
          Out{rec.ts_ns + d.delay_ns, seq++, std::vector<std::byte>(d.out.begin(), d.out.end())});
  }
  if (!reader.error().empty()) {
    std::cerr << "mrc-inject: " << reader.error() << "\n";
    return kExitUsage;
  }
  if (!policy) policy = std::make_unique<Policy>(cfg.policy, 0, *profile);
  int rc = kExitOk;
  if (log.is_open() && !log.close(policy.get())) {
    std::cerr << "mrc-inject: " << log.error() << "\n";
    rc = kExitRuntime;
  }
  if (!out_path.empty()) {
    std::stable_sort(out.begin(), out.end(), [](const Out& a, const Out& b) {
      return a.t_ns != b.t_ns ? a.t_ns < b.t_ns : a.seq < b.seq;
    });
    wire::CaptureWriter w;
    if (!w.open(out_path, wire::CaptureFormat::kPcap)) {
      std::cerr << "mrc-inject: " << w.error() << "\n";
      return kExitRuntime;
    }
    for (const Out& o : out) w.write(o.t_ns, wire::Bytes(o.bytes.data(), o.bytes.size()));
    if (!w.close()) {
      std::cerr << "mrc-inject: " << w.error() << "\n";
      return kExitRuntime;
    }
  }
  std::string s;
  append_summary_json(s, *policy);
  std::cout << s << "\n";
  return rc;
}

int cmd_ctl(const std::string& path, const std::vector<std::string>& commands) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un sa{};
  if (path.size() >= sizeof sa.sun_path) {
    std::cerr << "mrc-inject: control socket path too long\n";
    return kExitUsage;
  }
  sa.sun_family = AF_UNIX;
  std::memcpy(sa.sun_path, path.c_str(), path.size() + 1);
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    std::cerr << "mrc-inject: " << path << ": " << std::strerror(errno)
              << " (is the relay running with --control?)\n";
    if (fd >= 0) ::close(fd);
    return kExitRuntime;
  }
  int rc = kExitOk;
  std::string pending;
  for (const std::string& cmd : commands) {
    // Shorthands for interactive use; anything starting with '{' is sent as is.
    std::string line = cmd;
    if (cmd.empty() || cmd[0] != '{') {
      std::istringstream ss(cmd);
      std::string word, a, b;
      ss >> word >> a >> b;
      nlohmann::json j;
      if (word == "stats" || word == "rules" || word == "stop") {
        j = {{"cmd", word}};
      } else if (word == "remove" && !a.empty()) {
        j = {{"cmd", "remove_rule"}, {"name", a}};
      } else if (word == "flap" && !a.empty()) {
        // flap MS | flap LINK MS
        j = {{"cmd", "flap"}};
        if (!b.empty()) {
          j["link"] = a;
          a = b;
        }
        char* end = nullptr;
        const double ms = std::strtod(a.c_str(), &end);
        if (*end != '\0') {
          std::cerr << "mrc-inject: flap [LINK] DOWN_MS\n";
          ::close(fd);
          return kExitUsage;
        }
        j["down_ms"] = ms;
      } else if (word == "add") {
        const size_t brace = cmd.find('{');
        if (brace == std::string::npos) {
          std::cerr << "mrc-inject: add RULE_JSON\n";
          ::close(fd);
          return kExitUsage;
        }
        try {
          j = {{"cmd", "add_rule"}, {"rule", nlohmann::json::parse(cmd.substr(brace))}};
        } catch (const std::exception& e) {
          std::cerr << "mrc-inject: add: " << e.what() << "\n";
          ::close(fd);
          return kExitUsage;
        }
      } else {
        std::cerr
            << "mrc-inject: unknown command '" << cmd
            << "' (stats, rules, stop, remove NAME, flap [LINK] MS, add RULE_JSON, or JSON)\n";
        ::close(fd);
        return kExitUsage;
      }
      line = j.dump();
    }
    line += '\n';
    if (send(fd, line.data(), line.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(line.size())) {
      std::cerr << "mrc-inject: send: " << std::strerror(errno) << "\n";
      rc = kExitRuntime;
      break;
    }
    std::string reply;
    char buf[4096];
    while (reply.find('\n') == std::string::npos) {
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n <= 0) break;
      reply.append(buf, static_cast<size_t>(n));
    }
    if (reply.empty()) {
      std::cerr << "mrc-inject: no reply\n";
      rc = kExitRuntime;
      break;
    }
    std::cout << reply << std::flush;
    if (reply.find("\"ok\":false") != std::string::npos) rc = kExitRuntime;
  }
  ::close(fd);
  return rc;
}

}  // namespace

int inject_main(int argc, char** argv) {
  CLI::App app{
      "mrc-inject: MRC-aware fault injector (AF_PACKET relay, seeded policy, decision log)"};
  app.require_subcommand(1);

  Common run_c;
  std::string pcap_dir, node = "inject";
  double duration_s = 0;
  size_t batch = 32;
  bool quiet = false;
  CLI::App* run = app.add_subcommand(
      "run", "Relay frames between the two interfaces of each link through the policy (root)");
  add_common(*run, run_c, true);
  run->add_option("--control", run_c.control_path, "UNIX socket for runtime control (see ctl)");
  run->add_option("--pcap-dir", pcap_dir, "Write per-side captures <dir>/<node>-<iface>.pcap");
  run->add_option("--node", node, "Node name for capture file names")->capture_default_str();
  run->add_option("--duration", duration_s,
                  "Stop after this many seconds (default: on SIGINT/SIGTERM)");
  run->add_option("--batch", batch, "Frames per recvmmsg/sendmmsg (1..256)")->capture_default_str();
  run->add_flag("-q,--quiet", quiet, "No banner and no summary on stdout");

  Common check_c;
  CLI::App* check = app.add_subcommand("check", "Validate a config and print its rules as JSON");
  add_common(*check, check_c, true);

  Common replay_c;
  std::string in_path, out_path, dir_s = "ab", link_name;
  CLI::App* replay = app.add_subcommand(
      "replay", "Apply the policy offline to a capture (timestamps as the clock)");
  add_common(*replay, replay_c, true);
  replay->add_option("-i,--in", in_path, "Input capture (pcap or pcapng, Ethernet)")->required();
  replay->add_option("-o,--out", out_path, "Output capture of what the far side would receive");
  replay->add_option("--dir", dir_s, "Direction of the frames: ab or ba")->capture_default_str();
  replay->add_option("--link-name", link_name, "Which configured link the frames cross");

  std::string ctl_path;
  std::vector<std::string> ctl_cmds;
  CLI::App* ctl = app.add_subcommand("ctl", "Send commands to a running relay's control socket");
  ctl->add_option("-s,--control", ctl_path, "Control socket path")->required();
  ctl->add_option("commands", ctl_cmds,
                  "stats | rules | stop | remove NAME | flap [LINK] MS | add RULE_JSON | raw JSON")
      ->required();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? kExitOk : kExitUsage;
  }
  if (run->parsed()) return cmd_run(run_c, pcap_dir, node, duration_s, batch, quiet);
  if (check->parsed()) return cmd_check(check_c);
  if (replay->parsed()) return cmd_replay(replay_c, in_path, out_path, dir_s, link_name);
  if (ctl->parsed()) return cmd_ctl(ctl_path, ctl_cmds);
  return kExitUsage;
}

}  // namespace mrc::faults
