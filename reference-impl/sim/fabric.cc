// The multi-plane fabric: per plane a leaf per node and `paths` spines.
#include <stdexcept>

#include "reference-impl/sim/sim.h"

namespace mrc::sim {

namespace {
uint64_t mix64(uint64_t x) {
  uint64_t state = x;
  return splitmix64(state);
}
}  // namespace

Fabric::Fabric(Simulator& sim, FabricConfig config, std::vector<NodeId> nodes)
    : sim_(sim), config_(std::move(config)), nodes_(std::move(nodes)) {
  if (config_.planes == 0) throw std::invalid_argument("mrc::sim::Fabric: planes must be >= 1");
  if (config_.paths == 0) throw std::invalid_argument("mrc::sim::Fabric: paths must be >= 1");
  if (nodes_.size() < 2) throw std::invalid_argument("mrc::sim::Fabric: needs at least 2 nodes");
  if (config_.select == PathSelect::kCustom && !config_.custom_select) {
    throw std::invalid_argument("mrc::sim::Fabric: PathSelect::kCustom without custom_select");
  }
  const uint8_t planes = config_.planes;
  const uint32_t paths = config_.paths;
  for (uint8_t pl = 1; pl <= planes; ++pl) {
    hash_seed_.push_back(derive_seed(sim_.seed(), "ecmp", pl));
  }
  const size_t n_nodes = nodes_.size();
  up_.assign(n_nodes, std::vector<LinkId>(planes, kNone));
  down_.assign(n_nodes, std::vector<LinkId>(planes, kNone));
  l2s_.assign(n_nodes, std::vector<std::vector<LinkId>>(planes, std::vector<LinkId>(paths, kNone)));
  s2l_.assign(n_nodes, std::vector<std::vector<LinkId>>(planes, std::vector<LinkId>(paths, kNone)));

  for (uint8_t pl = 1; pl <= planes; ++pl) {
    const std::string p = "p" + std::to_string(pl);
    // Spines first so leaf links can point at them.
    std::vector<SwitchId> spines;
    for (uint32_t m = 0; m < paths; ++m) {
      spines.push_back(
          sim_.add_switch(p + ".s" + std::to_string(m),
                          [this, pl, m](const Packet& pk) { return route_spine(pl, m, pk); }));
    }
    for (size_t i = 0; i < n_nodes; ++i) {
      const NodeId n = nodes_[i];
      const std::string& name = sim_.node_name(n);
      const SwitchId leaf = sim_.add_switch(
          p + ".leaf." + name, [this, i, pl](const Packet& pk) { return route_leaf(i, pl, pk); });
      LinkConfig up = config_.host_link;
      up.name = name + "." + p + ".up";
      up.last_hop = false;
      const LinkId u = sim_.add_link(std::move(up));
      sim_.connect_port(n, pl, u);
      sim_.link_to_switch(u, leaf);
      up_[i][pl - 1] = u;

      LinkConfig down = config_.host_link;
      down.name = name + "." + p + ".down";
      down.last_hop = true;
      const LinkId d = sim_.add_link(std::move(down));
      sim_.link_to_node(d, n, pl);
      down_[i][pl - 1] = d;

      for (uint32_t m = 0; m < paths; ++m) {
        const std::string s = "s" + std::to_string(m);
        LinkConfig ls = config_.fabric_link;
        ls.name = p + "." + name + ">" + s;
        ls.last_hop = false;
        const LinkId a = sim_.add_link(std::move(ls));
        sim_.link_to_switch(a, spines[m]);
        l2s_[i][pl - 1][m] = a;

        LinkConfig sl = config_.fabric_link;
        sl.name = p + "." + s + ">" + name;
        sl.last_hop = false;
        const LinkId b = sim_.add_link(std::move(sl));
        sim_.link_to_switch(b, leaf);
        s2l_[i][pl - 1][m] = b;
      }
    }
  }
}

size_t Fabric::node_index(NodeId node) const {
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i] == node) return i;
  }
  throw std::out_of_range("mrc::sim::Fabric: node " + std::to_string(node) + " not in the fabric");
}

uint32_t Fabric::path_of(const Packet& packet, uint8_t plane) const {
  const uint32_t paths = config_.paths;
  switch (config_.select) {
    case PathSelect::kWevModulo:
      return packet.info.wev % paths;
    case PathSelect::kFlowHash: {
      const uint64_t seed = plane >= 1 && plane <= hash_seed_.size() ? hash_seed_[plane - 1] : 0;
      const uint64_t key = (uint64_t{packet.info.sport} << 20) ^ packet.info.flow_label;
      return static_cast<uint32_t>(mix64(seed ^ key) % paths);
    }
    case PathSelect::kCustom:
      return config_.custom_select(packet, paths) % paths;
  }
  return 0;
}

LinkId Fabric::route_leaf(size_t i, uint8_t plane, const Packet& packet) const {
  if (packet.dst_node == kNone) return kNone;
  if (packet.dst_node == nodes_[i]) return down_[i][plane - 1];
  return l2s_[i][plane - 1][path_of(packet, plane)];
}

LinkId Fabric::route_spine(uint8_t plane, uint32_t path, const Packet& packet) const {
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i] == packet.dst_node) return s2l_[i][plane - 1][path];
  }
  return kNone;
}

static void check_plane(uint8_t plane, uint8_t planes) {
  if (plane == 0 || plane > planes) {
    throw std::out_of_range("mrc::sim::Fabric: plane " + std::to_string(plane) + " outside 1.." +
                            std::to_string(planes));
  }
}

LinkId Fabric::uplink(NodeId node, uint8_t plane) const {
  check_plane(plane, config_.planes);
  return up_[node_index(node)][plane - 1];
}

LinkId Fabric::downlink(NodeId node, uint8_t plane) const {
  check_plane(plane, config_.planes);
  return down_[node_index(node)][plane - 1];
}

LinkId Fabric::leaf_to_spine(NodeId node, uint8_t plane, uint32_t path) const {
  check_plane(plane, config_.planes);
  return l2s_[node_index(node)][plane - 1].at(path);
}

LinkId Fabric::spine_to_leaf(NodeId node, uint8_t plane, uint32_t path) const {
  check_plane(plane, config_.planes);
  return s2l_[node_index(node)][plane - 1].at(path);
}

std::vector<LinkId> Fabric::path_links(uint8_t plane, uint32_t path) const {
  check_plane(plane, config_.planes);
  if (path >= config_.paths) throw std::out_of_range("mrc::sim::Fabric: path out of range");
  std::vector<LinkId> out;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    out.push_back(l2s_[i][plane - 1][path]);
    out.push_back(s2l_[i][plane - 1][path]);
  }
  return out;
}

std::vector<LinkId> Fabric::plane_links(uint8_t plane) const {
  check_plane(plane, config_.planes);
  std::vector<LinkId> out;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    out.push_back(up_[i][plane - 1]);
    out.push_back(down_[i][plane - 1]);
  }
  for (uint32_t m = 0; m < config_.paths; ++m) {
    for (LinkId l : path_links(plane, m)) out.push_back(l);
  }
  return out;
}

std::vector<LinkId> Fabric::all_links() const {
  std::vector<LinkId> out;
  for (uint8_t pl = 1; pl <= config_.planes; ++pl) {
    for (LinkId l : plane_links(pl)) out.push_back(l);
  }
  return out;
}

void Fabric::fail_path(uint8_t plane, uint32_t path, uint64_t from_ns, uint64_t until_ns) {
  for (LinkId l : path_links(plane, path)) sim_.link_down_between(l, from_ns, until_ns);
}

void Fabric::fail_plane(uint8_t plane, uint64_t from_ns, uint64_t until_ns) {
  for (LinkId l : plane_links(plane)) sim_.link_down_between(l, from_ns, until_ns);
}

}  // namespace mrc::sim
