// Writes the seed corpora of the engine fuzz targets: the frames each endpoint received during
// short simulated transfers (fuzz_setup.h's connection, on a 2-plane fabric) with loss, trims, ECN
// marks, reordering and duplicates, so the corpora hold data, probes, SACKs, NACKs, transport ACKs
// and endpoint messages exactly as the engine produces them.
//
// Usage: engine_fuzz_corpus OUT_DIR   (creates OUT_DIR/responder and OUT_DIR/requester)
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <string>
#include <vector>

#include "reference-impl/engine/fuzz/fuzz_setup.h"
#include "reference-impl/sim/sim.h"

using namespace mrc;
using namespace mrc::engine::fuzz;

namespace {

struct Arrival {
  uint64_t t_ns;
  uint8_t port;
  std::vector<std::byte> frame;
};

// Forwards to the endpoint and remembers what arrived.
class RecordingNode final : public sim::Node {
 public:
  explicit RecordingNode(engine::Endpoint& ep) : inner_(ep) {}
  void on_packet(std::span<const std::byte> frame, uint8_t port, uint64_t now_ns) override {
    arrivals.push_back({now_ns, port, {frame.begin(), frame.end()}});
    inner_.on_packet(frame, port, now_ns);
  }
  void on_timer(uint64_t now_ns) override { inner_.on_timer(now_ns); }
  bool poll_tx(uint64_t now_ns, sim::TxFrame& out) override { return inner_.poll_tx(now_ns, out); }
  uint64_t next_deadline_ns() const override { return inner_.next_deadline_ns(); }
  std::vector<Arrival> arrivals;

 private:
  sim::EndpointNode<engine::Endpoint> inner_;
};

bool write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) {
    std::fprintf(stderr, "engine_fuzz_corpus: %s: %s\n", path.c_str(), std::strerror(errno));
    return false;
  }
  const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  return std::fclose(f) == 0 && ok;
}

// Files: every arrival alone, runs of 4 consecutive arrivals, and the whole sequence.
bool write_corpus(const std::string& dir, const std::string& tag, const std::vector<Arrival>& in,
                  size_t& files) {
  auto rec = [&](size_t i, std::vector<uint8_t>& out) {
    const uint64_t gap = i == 0 ? 0 : in[i].t_ns - in[i - 1].t_ns;
    append_record(out, ctl_for(in[i].port, gap), in[i].frame);
  };
  for (size_t i = 0; i < in.size(); ++i) {
    std::vector<uint8_t> one, four;
    rec(i, one);
    for (size_t j = i; j < std::min(in.size(), i + 4); ++j) rec(j, four);
    if (!write_file(dir + "/" + tag + "-one-" + std::to_string(i), one)) return false;
    if (i % 4 == 0 && !write_file(dir + "/" + tag + "-run-" + std::to_string(i), four))
      return false;
    files += 1 + (i % 4 == 0);
  }
  std::vector<uint8_t> all;
  for (size_t i = 0; i < in.size(); ++i) rec(i, all);
  files += 1;
  return write_file(dir + "/" + tag + "-all", all);
}

// One transfer a -> b through the simulator; `faults` adds the fault mix.
bool run(uint64_t seed, bool faults, FixedRegion& region, const std::string& out, size_t& files) {
  Pair p;
  make_pair(p);
  for (int n = 0; n < 2; ++n) {
    Pair side;
    make_side(side, n);
    if (side.qpn[0] != p.qpn[0] || side.qpn[1] != p.qpn[1] || side.sq_psn[0] != p.sq_psn[0] ||
        side.sq_psn[1] != p.sq_psn[1])
      die("make_side does not reproduce make_pair: the recorded frames would not fit the targets");
  }
  engine::MemoryRegion mr_b, mr_a;
  prepare_responder(p, region, mr_b);
  if (mr_b.rkey != responder_rkey()) die("responder rkey differs from the precomputed one");
  std::memset(region.data(), 0, kTransferBytes);

  sim::SimConfig sc;
  sc.seed = seed;
  sim::Simulator s(sc);
  RecordingNode na(*p.ep[0]), nb(*p.ep[1]);
  const sim::NodeId ia = s.add_node("a", na), ib = s.add_node("b", nb);
  s.set_node_address(ia, gid(0));
  s.set_node_address(ib, gid(1));
  sim::FabricConfig fc;
  fc.planes = kPorts;
  fc.paths = 4;
  sim::Fabric fab(s, fc, {ia, ib});
  if (faults) {
    for (uint8_t pl = 1; pl <= kPorts; ++pl) {
      s.add_fault(fab.uplink(ia, pl), sim::Fault::drop().with_probability(0.08));
      s.add_fault(fab.uplink(ib, pl), sim::Fault::drop().with_probability(0.08));
      s.add_fault(fab.leaf_to_spine(ia, pl, 1), sim::Fault::trim().with_probability(0.3));
      s.add_fault(fab.leaf_to_spine(ia, pl, 2), sim::Fault::mark_ecn().with_probability(0.3));
      s.add_fault(fab.leaf_to_spine(ia, pl, 3), sim::Fault::delay(0, 3'000).with_probability(0.3));
      s.add_fault(fab.downlink(ib, pl), sim::Fault::duplicate().with_probability(0.1));
    }
  }
  s.run_until(kStartNs);  // the transfer starts at the targets' clock
  post_transfer(p, mr_a);
  const std::vector<uint8_t>& src = source_bytes();
  // Reliability probes and endpoint operations appear in the corpus too.
  engine::EpRequest req;
  req.req_id = 7;
  req.dgid = gid(1);
  req.op = wire::EndpointOp::kEvProbe;
  req.wev = 0x10203040;
  req.port = 2;
  p.ep[0]->ep_post_request(req, s.now_ns());
  if (!p.ep[0]->set_port_state(2, false, s.now_ns()).ok()) die("set_port_state");
  if (!p.ep[0]->set_port_state(2, true, s.now_ns() + 1).ok()) die("set_port_state");
  s.wake(ia);
  const sim::RunResult r = s.run_until(kStartNs + 50'000'000);
  if (r.status == sim::RunStatus::kError) {
    std::fprintf(stderr, "engine_fuzz_corpus: simulator: %s\n", r.error.c_str());
    return false;
  }
  if (std::memcmp(region.data(), src.data(), kTransferBytes) != 0) die("transfer not exact");
  const std::string tag = (faults ? "faults" : "clean") + std::to_string(seed);
  std::printf("%s: b received %zu frames, a received %zu\n", tag.c_str(), nb.arrivals.size(),
              na.arrivals.size());
  return write_corpus(out + "/responder", tag, nb.arrivals, files) &&
         write_corpus(out + "/requester", tag, na.arrivals, files);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  const std::string out = argv[1];
  for (const std::string& d : {out, out + "/responder", out + "/requester"}) {
    if (::mkdir(d.c_str(), 0755) != 0 && errno != EEXIST) {
      std::fprintf(stderr, "engine_fuzz_corpus: mkdir %s: %s\n", d.c_str(), std::strerror(errno));
      return 1;
    }
  }
  FixedRegion region;
  size_t files = 0;
  bool ok = run(1, false, region, out, files);
  for (uint64_t seed = 2; ok && seed <= 12; ++seed) ok = run(seed, true, region, out, files);
  if (!ok) return 1;
  std::printf("wrote %zu corpus files under %s\n", files, out.c_str());
  return 0;
}
