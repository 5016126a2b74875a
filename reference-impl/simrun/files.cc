// Topology and connection-matrix files, and the workload generators.
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <fstream>
#include <numeric>
#include <sstream>

#include "reference-impl/sim/sim.h"
#include "reference-impl/simrun/simrun.h"

namespace mrc::simrun {

namespace {

std::vector<std::string_view> split_words(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
    size_t j = i;
    while (j < line.size() && line[j] != ' ' && line[j] != '\t' && line[j] != '\r') ++j;
    if (j > i) out.push_back(line.substr(i, j - i));
    i = j;
  }
  return out;
}

bool parse_u64(std::string_view s, uint64_t& out) {
  if (s.empty()) return false;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

bool parse_double(std::string_view s, double& out) {
  if (s.empty()) return false;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size() && std::isfinite(out);
}

bool read_file(const std::string& path, std::string& text, std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (error) *error = path + ": cannot open";
    return false;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  text = ss.str();
  return true;
}

// Lines with their 1-based numbers, comments (#) stripped.
template <typename Fn>
bool for_each_line(std::string_view text, Fn&& fn) {
  size_t line_no = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(pos, nl - pos);
    ++line_no;
    if (const size_t hash = line.find('#'); hash != std::string_view::npos) {
      line = line.substr(0, hash);
    }
    if (!fn(line_no, split_words(line))) return false;
    if (nl == text.size()) break;
    pos = nl + 1;
  }
  return true;
}

std::string where(std::string_view name, size_t line) {
  return std::string(name) + ":" + std::to_string(line);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Topology file
// ---------------------------------------------------------------------------------------------
bool parse_topology_text(std::string_view text, std::string_view name, Topology& out,
                         std::string* error) {
  Topology t = out;
  std::string err;
  const bool ok = for_each_line(text, [&](size_t ln, const std::vector<std::string_view>& w) {
    if (w.empty()) return true;
    auto fail = [&](const std::string& what) {
      err = where(name, ln) + ": " + what;
      return false;
    };
    const std::string key(w[0]);
    if (key == "fail") {
      // fail random <K> rate <F>
      // fail plane <p> [leaf <l>] [spine <s>] (down | rate <F>) [from_us <t>] [until_us <t>]
      if (w.size() >= 2 && w[1] == "random") {
        uint64_t k = 0;
        double f = 0;
        if (w.size() != 5 || !parse_u64(w[2], k) || w[3] != "rate" || !parse_double(w[4], f))
          return fail("expected 'fail random <count> rate <fraction>'");
        if (f <= 0 || f >= 1)
          return fail("rate fraction must be in (0, 1), got " + std::string(w[4]));
        t.random_degraded = static_cast<uint32_t>(k);
        t.random_degraded_fraction = f;
        return true;
      }
      Failure f;
      f.where = where(name, ln);
      bool have_plane = false, have_kind = false;
      for (size_t i = 1; i < w.size(); ++i) {
        const std::string_view k = w[i];
        if (k == "down") {
          f.down = true;
          have_kind = true;
          continue;
        }
        if (i + 1 >= w.size()) return fail("'" + std::string(k) + "' needs a value");
        const std::string_view v = w[++i];
        uint64_t u = 0;
        double d = 0;
        if (k == "plane" || k == "leaf" || k == "spine" || k == "agg" || k == "core") {
          if (!parse_u64(v, u) || u > UINT32_MAX)
            return fail(std::string(k) + ": not a number: " + std::string(v));
          if (k == "plane") {
            if (u == 0 || u > 255) return fail("plane must be in 1..255");
            f.plane = static_cast<uint8_t>(u);
            have_plane = true;
          } else if (k == "leaf") {
            f.leaf = static_cast<int64_t>(u);
          } else if (k == "core") {
            f.core = static_cast<int64_t>(u);
          } else {
            // 3 tiers: the aggregation switch (`agg`; `spine` names the same switch).
            f.spine = static_cast<int64_t>(u);
          }
        } else if (k == "rate") {
          if (!parse_double(v, d) || d <= 0 || d >= 1)
            return fail("rate: a fraction in (0, 1) expected, got " + std::string(v));
          f.down = false;
          f.rate_fraction = d;
          have_kind = true;
        } else if (k == "from_us" || k == "until_us") {
          if (!parse_double(v, d) || d < 0)
            return fail(std::string(k) + ": not a time in microseconds: " + std::string(v));
          (k == "from_us" ? f.from_ns : f.until_ns) = static_cast<uint64_t>(std::llround(d * 1e3));
        } else {
          return fail("unknown word in fail line: '" + std::string(k) + "'");
        }
      }
      if (!have_plane) return fail("fail line without 'plane <p>'");
      if (!have_kind) return fail("fail line needs 'down' or 'rate <fraction>'");
      if (!f.down && (f.from_ns != 0 || f.until_ns != kForeverNs))
        return fail("a degraded link ('rate') lasts the whole run; use 'down' for timed failures");
      if (f.until_ns <= f.from_ns) return fail("until_us must be after from_us");
      t.failures.push_back(std::move(f));
      return true;
    }
    if (w.size() != 2)
      return fail("expected '<key> <value>', got " + std::to_string(w.size()) + " words");
    const std::string_view v = w[1];
    uint64_t u = 0;
    double d = 0;
    auto need_u = [&](uint64_t lo, uint64_t hi) {
      if (!parse_u64(v, u) || u < lo || u > hi) {
        err = where(name, ln) + ": " + key + ": expected an integer in " + std::to_string(lo) +
              ".." + std::to_string(hi) + ", got '" + std::string(v) + "'";
        return false;
      }
      return true;
    };
    if (key == "tiers") {
      if (!need_u(2, 3)) return false;
      t.tiers = static_cast<uint32_t>(u);
    } else if (key == "leaves_per_pod") {
      if (!need_u(1, 1u << 16)) return false;
      t.leaves_per_pod = static_cast<uint32_t>(u);
    } else if (key == "cores") {
      if (!need_u(1, 1u << 16)) return false;
      t.cores = static_cast<uint32_t>(u);
    } else if (key == "routing") {
      if (v == "ecmp") {
        t.routing = Routing::kEcmp;
      } else if (v == "srv6") {
        t.routing = Routing::kSrv6;
      } else {
        return fail("routing: expected ecmp or srv6, got '" + std::string(v) + "'");
      }
    } else if (key == "hosts") {
      if (!need_u(2, 1u << 16)) return false;
      t.hosts = static_cast<uint32_t>(u);
    } else if (key == "planes") {
      if (!need_u(1, 16)) return false;
      t.planes = static_cast<uint32_t>(u);
    } else if (key == "hosts_per_leaf") {
      if (!need_u(1, 1u << 16)) return false;
      t.hosts_per_leaf = static_cast<uint32_t>(u);
    } else if (key == "spines") {
      if (!need_u(1, 4096)) return false;
      t.spines = static_cast<uint32_t>(u);
    } else if (key == "host_rate_gbps" || key == "fabric_rate_gbps") {
      if (!parse_double(v, d) || d <= 0 || d > 1e5)
        return fail(key + ": expected a rate in Gb/s, got '" + std::string(v) + "'");
      (key == "host_rate_gbps" ? t.host_rate_bps : t.fabric_rate_bps) =
          static_cast<uint64_t>(std::llround(d * 1e9));
    } else if (key == "host_delay_ns") {
      if (!need_u(0, 1'000'000'000)) return false;
      t.host_delay_ns = u;
    } else if (key == "fabric_delay_ns") {
      if (!need_u(0, 1'000'000'000)) return false;
      t.fabric_delay_ns = u;
    } else if (key == "queue_bytes") {
      if (!need_u(4096, uint64_t{1} << 40)) return false;
      t.queue_bytes = u;
    } else if (key == "ecn_threshold_bytes") {
      if (!need_u(0, uint64_t{1} << 40)) return false;
      t.ecn_threshold_bytes = u;
    } else if (key == "trim") {
      if (v == "on" || v == "true" || v == "1") {
        t.trim = true;
      } else if (v == "off" || v == "false" || v == "0") {
        t.trim = false;
      } else {
        return fail("trim: expected on or off, got '" + std::string(v) + "'");
      }
    } else {
      return fail("unknown key '" + key + "'");
    }
    return true;
  });
  if (!ok) {
    if (error) *error = err;
    return false;
  }
  const std::string problem = validate_topology(t);
  if (!problem.empty()) {
    if (error) *error = std::string(name) + ": " + problem;
    return false;
  }
  out = std::move(t);
  return true;
}

bool load_topology(const std::string& path, Topology& out, std::string* error) {
  std::string text;
  if (!read_file(path, text, error)) return false;
  return parse_topology_text(text, path, out, error);
}

std::string validate_topology(const Topology& t) {
  if (t.tiers != 2 && t.tiers != 3) return "tiers must be 2 or 3";
  if (t.planes == 0 || t.planes > 16) return "planes must be in 1..16";
  if (t.hosts < 2) return "hosts must be at least 2";
  if (t.hosts_per_leaf == 0 || t.hosts % t.hosts_per_leaf != 0)
    return "hosts (" + std::to_string(t.hosts) + ") must be a multiple of hosts_per_leaf (" +
           std::to_string(t.hosts_per_leaf) + ")";
  if (t.spines == 0) return "spines must be at least 1";
  if (t.tiers == 3) {
    if (t.leaves_per_pod == 0 || t.leaves() % t.leaves_per_pod != 0)
      return "tiers 3: the leaves (" + std::to_string(t.leaves()) +
             ") must be a multiple of leaves_per_pod (" + std::to_string(t.leaves_per_pod) + ")";
    if (t.pods() < 2) return "tiers 3: at least 2 pods (leaves / leaves_per_pod), got 1";
    if (t.cores == 0 || t.cores % t.spines != 0)
      return "tiers 3: cores (" + std::to_string(t.cores) +
             ") must be a positive multiple of spines, the aggregation switches per pod (" +
             std::to_string(t.spines) + ")";
  } else if (t.leaves_per_pod != 0 || t.cores != 0) {
    return "leaves_per_pod and cores need tiers 3";
  }
  if (t.host_rate_bps == 0 || t.fabric_rate_bps == 0) return "link rates must be positive";
  // Links of one plane: host up and down, leaf <-> spine/aggregation, aggregation <-> core.
  const uint64_t leaf_cables = uint64_t{t.leaves()} * t.spines;
  const uint64_t core_cables = t.tiers == 3 ? uint64_t{t.pods()} * t.cores : 0;
  const uint64_t links = t.planes * 2 * (uint64_t{t.hosts} + leaf_cables + core_cables);
  if (links > (uint64_t{1} << 24))
    return std::to_string(links) + " links: more than the 2^24 this simulator builds";
  const uint64_t cables = t.planes * (t.tiers == 3 ? core_cables : leaf_cables);
  if (t.random_degraded > cables)
    return "fail random " + std::to_string(t.random_degraded) + ": only " + std::to_string(cables) +
           (t.tiers == 3 ? " aggregation-core cables" : " leaf-spine cables");
  const int64_t aggs = int64_t{t.pods()} * t.spines;
  for (const Failure& f : t.failures) {
    const std::string at = f.where.empty() ? std::string("fail") : f.where;
    if (f.plane == 0 || f.plane > t.planes)
      return at + ": plane " + std::to_string(f.plane) + " outside 1.." + std::to_string(t.planes);
    if (f.leaf >= static_cast<int64_t>(t.leaves()))
      return at + ": leaf " + std::to_string(f.leaf) + " outside 0.." +
             std::to_string(t.leaves() - 1);
    const char* sw = t.tiers == 3 ? "agg " : "spine ";
    if (f.spine >= aggs)
      return at + ": " + sw + std::to_string(f.spine) + " outside 0.." + std::to_string(aggs - 1) +
             (t.tiers == 3 ? " (aggregation switches are numbered across pods)" : "");
    if (f.core >= 0 && t.tiers != 3) return at + ": 'core' needs tiers 3";
    if (f.core >= static_cast<int64_t>(t.cores))
      return at + ": core " + std::to_string(f.core) + " outside 0.." + std::to_string(t.cores - 1);
    if (f.leaf >= 0 && f.core >= 0)
      return at + ": a leaf has no cable to a core; name a leaf and an agg, or an agg and a core";
    if (t.tiers == 3 && f.leaf >= 0 && f.spine >= 0 &&
        f.leaf / t.leaves_per_pod != f.spine / t.spines)
      return at + ": leaf " + std::to_string(f.leaf) + " (pod " +
             std::to_string(f.leaf / t.leaves_per_pod) + ") has no cable to agg " +
             std::to_string(f.spine) + " (pod " + std::to_string(f.spine / t.spines) + ")";
    if (f.spine >= 0 && f.core >= 0 && f.spine % t.spines != f.core % t.spines)
      return at + ": agg " + std::to_string(f.spine) + " has no cable to core " +
             std::to_string(f.core) + " (agg a of a pod connects to the cores c with c mod " +
             std::to_string(t.spines) + " = a mod " + std::to_string(t.spines) + ")";
  }
  return {};
}

std::string pinned_ev_check(const Topology& t, uint32_t evs) {
  // The round (i / (planes x paths)) and plane go in bits 30..16: distinct EVs need
  // planes x rounds <= 2^15.
  const uint64_t paths = t.paths();
  if (paths == 0 || paths > 0xFFFF) return "routing srv6: more than 65535 paths per plane";
  const uint64_t rounds = (evs + t.planes * paths - 1) / (t.planes * paths);
  if (rounds * t.planes > 0x8000)
    return "routing srv6: " + std::to_string(evs) + " EVs are more than 2^15 per path";
  return {};
}

// ---------------------------------------------------------------------------------------------
// Connection matrix
// ---------------------------------------------------------------------------------------------
bool parse_cm_text(std::string_view text, std::string_view name, Workload& out,
                   std::string* error) {
  Workload wl;
  std::string err;
  bool have_nodes = false, have_conns = false;
  uint64_t conns = 0;
  size_t conns_line = 0;
  const bool ok = for_each_line(text, [&](size_t ln, const std::vector<std::string_view>& w) {
    if (w.empty()) return true;
    auto fail = [&](const std::string& what) {
      err = where(name, ln) + ": " + what;
      return false;
    };
    uint64_t u = 0;
    if (w[0] == "Nodes") {
      if (w.size() != 2 || !parse_u64(w[1], u) || u < 2 || u > (1u << 16))
        return fail("expected 'Nodes <count>' with a count in 2..65536");
      wl.nodes = static_cast<uint32_t>(u);
      have_nodes = true;
      return true;
    }
    if (w[0] == "Connections") {
      if (w.size() != 2 || !parse_u64(w[1], u) || u > (1u << 24))
        return fail("expected 'Connections <count>'");
      conns = u;
      conns_line = ln;
      have_conns = true;
      return true;
    }
    if (w[0] == "Triggers" || w[0] == "Failures" || w[0] == "trigger" || w[0] == "failure")
      return fail("htsim '" + std::string(w[0]) +
                  "' entries are not supported by mrct sim (failures go in the topology file)");
    const size_t arrow = w[0].find("->");
    if (arrow == std::string_view::npos)
      return fail("expected '<src>-><dst> ... size <bytes>', got '" + std::string(w[0]) + "'");
    if (!have_nodes) return fail("connection before the 'Nodes' line");
    Flow f;
    uint64_t src = 0, dst = 0;
    if (!parse_u64(w[0].substr(0, arrow), src) || !parse_u64(w[0].substr(arrow + 2), dst))
      return fail("bad endpoints '" + std::string(w[0]) + "'");
    if (src >= wl.nodes || dst >= wl.nodes)
      return fail("node out of range in '" + std::string(w[0]) + "' (Nodes " +
                  std::to_string(wl.nodes) + ")");
    if (src == dst) return fail("a node cannot send to itself: '" + std::string(w[0]) + "'");
    f.src = static_cast<uint32_t>(src);
    f.dst = static_cast<uint32_t>(dst);
    f.id = static_cast<uint32_t>(wl.flows.size() + 1);
    bool have_size = false;
    for (size_t i = 1; i < w.size(); ++i) {
      const std::string_view k = w[i];
      if (i + 1 >= w.size()) return fail("'" + std::string(k) + "' needs a value");
      const std::string_view v = w[++i];
      double d = 0;
      if (k == "id") {
        if (!parse_u64(v, u) || u > UINT32_MAX) return fail("id: not a number: " + std::string(v));
        f.id = static_cast<uint32_t>(u);
      } else if (k == "start") {
        // Picoseconds, as htsim's connection-matrix reader takes them.
        if (!parse_double(v, d) || d < 0) return fail("start: not a time: " + std::string(v));
        f.start_ns = static_cast<uint64_t>(std::llround(d / 1000.0));
      } else if (k == "size") {
        if (!parse_u64(v, u) || u == 0 || u > (uint64_t{1} << 31))
          return fail("size: expected bytes in 1..2^31, got '" + std::string(v) + "'");
        f.bytes = u;
        have_size = true;
      } else if (k == "trigger" || k == "send_done_trigger" || k == "recv_done_trigger" ||
                 k == "priority") {
        return fail("htsim '" + std::string(k) + "' is not supported by mrct sim");
      } else {
        return fail("unknown word '" + std::string(k) + "'");
      }
    }
    if (!have_size) return fail("connection without 'size <bytes>'");
    wl.flows.push_back(f);
    return true;
  });
  if (ok && !have_nodes) err = std::string(name) + ":1: no 'Nodes <count>' line";
  if (ok && have_nodes && have_conns && conns != wl.flows.size())
    err = where(name, conns_line) + ": 'Connections " + std::to_string(conns) + "' but " +
          std::to_string(wl.flows.size()) + " connection lines";
  if (ok && have_nodes && wl.flows.empty()) err = std::string(name) + ": no connections";
  if (!err.empty()) {
    if (error) *error = err;
    return false;
  }
  out = std::move(wl);
  return true;
}

bool load_cm(const std::string& path, Workload& out, std::string* error) {
  std::string text;
  if (!read_file(path, text, error)) return false;
  return parse_cm_text(text, path, out, error);
}

namespace {
void shuffle(std::vector<uint32_t>& v, sim::Rng& rng) {
  for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[rng.uniform(i)]);
}
}  // namespace

std::string permutation_cm(uint32_t nodes, uint32_t conns, uint64_t bytes, uint64_t seed) {
  sim::Rng rng(sim::derive_seed(seed, "permutation", nodes));
  std::vector<uint32_t> srcs(nodes), dsts(nodes);
  std::iota(srcs.begin(), srcs.end(), 0u);
  std::iota(dsts.begin(), dsts.end(), 0u);
  shuffle(srcs, rng);
  shuffle(dsts, rng);
  // No node sends to itself: swap the destination with the next pair's (as htsim's generator).
  for (uint32_t n = 0; n < nodes; ++n) {
    if (srcs[n] == dsts[n]) std::swap(dsts[n], dsts[(n + 1) % nodes]);
  }
  conns = std::min(conns, nodes);
  std::ostringstream o;
  o << "Nodes " << nodes << "\nConnections " << conns << "\n";
  for (uint32_t n = 0; n < conns; ++n) {
    o << srcs[n] << "->" << dsts[n] << " id " << n + 1 << " start 0 size " << bytes << "\n";
  }
  return o.str();
}

std::string incast_cm(uint32_t nodes, uint32_t senders, uint32_t dst, uint64_t bytes,
                      uint64_t seed) {
  sim::Rng rng(sim::derive_seed(seed, "incast", nodes));
  std::vector<uint32_t> others;
  for (uint32_t n = 0; n < nodes; ++n)
    if (n != dst) others.push_back(n);
  shuffle(others, rng);
  senders = std::min<uint32_t>(senders, static_cast<uint32_t>(others.size()));
  std::sort(others.begin(), others.begin() + senders);
  std::ostringstream o;
  o << "Nodes " << nodes << "\nConnections " << senders << "\n";
  for (uint32_t n = 0; n < senders; ++n) {
    o << others[n] << "->" << dst << " id " << n + 1 << " start 0 size " << bytes << "\n";
  }
  return o.str();
}

std::string all_to_all_cm(uint32_t nodes, uint64_t bytes) {
  std::ostringstream o;
  o << "Nodes " << nodes << "\nConnections " << uint64_t{nodes} * (nodes - 1) << "\n";
  uint64_t id = 0;
  // Round k: every node sends to the node k after it, so each round is a permutation and no
  // receiver is the target of every sender's first flow.
  for (uint32_t k = 1; k < nodes; ++k) {
    for (uint32_t n = 0; n < nodes; ++n) {
      o << n << "->" << (n + k) % nodes << " id " << ++id << " start 0 size " << bytes << "\n";
    }
  }
  return o.str();
}

std::string ring_cm(uint32_t nodes, uint64_t bytes, uint32_t steps, uint64_t step_ps,
                    uint64_t seed) {
  sim::Rng rng(sim::derive_seed(seed, "ring", nodes));
  std::vector<uint32_t> ring(nodes);
  std::iota(ring.begin(), ring.end(), 0u);
  shuffle(ring, rng);
  std::ostringstream o;
  o << "Nodes " << nodes << "\nConnections " << uint64_t{nodes} * steps << "\n";
  uint64_t id = 0;
  for (uint32_t s = 0; s < steps; ++s) {
    for (uint32_t n = 0; n < nodes; ++n) {
      o << ring[n] << "->" << ring[(n + 1) % nodes] << " id " << ++id << " start " << s * step_ps
        << " size " << bytes << "\n";
    }
  }
  return o.str();
}

}  // namespace mrc::simrun
