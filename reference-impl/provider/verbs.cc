// The verbs entry points the MRC API relies on, for SoftMRC's software device.
//
// lib_mrc.so defines ibv_get_device_list, ibv_open_device, ibv_query_port, ibv_query_gid,
// ibv_alloc_pd, ibv_reg_mr and their companions. An application links lib_mrc.so before
// libibverbs (the OCP makefile does), so the dynamic linker binds these names to lib_mrc.so
// first. The device list is SoftMRC's device followed by the real devices libibverbs finds
// (reached through dlsym(RTLD_NEXT)); a call on a real device's object goes to libibverbs
// unchanged. Our verbs objects are plain structs: the inline wrappers of <infiniband/verbs.h>
// that look for extended ops (verbs_get_ctx_op) see a non-extended context and call the
// exported functions, which are ours.
//
// rxe: an MRC call on a context of a real rxe device attaches an MRC device to it (one per
// ibv_context, made on the first MRC call): its ports are the netdevs behind the device's GIDs,
// its GID table is the device's, index for index, and every MR registered on the device (a real
// rdma-core MR with rxe's lkey/rkey) is registered in the engine with those keys and its PD, so
// incoming MRC WRITEs are checked against exactly the MRs rxe knows. The data path stays the
// engine and runtime on AF_PACKET sockets of those netdevs (README.md, "Attached to rxe").
#include <dlfcn.h>
#include <net/if.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "reference-impl/provider/client.h"
#include "reference-impl/provider/softmrc.h"

namespace engine = mrc::engine;
namespace wire = mrc::wire;

#undef ibv_get_device_list
#undef ibv_query_port
#undef ibv_reg_mr
#undef ibv_reg_mr_iova

using softmrc::fail;
using softmrc::fail_null;

namespace {

struct SoftContext {
  ibv_context ctx;  // first: the pointer the application holds
  softmrc_device* dev;
  // Device mode (client.h): the connection and the device process's handle; dev is nullptr.
  softmrc::client::Conn* conn = nullptr;
  uint64_t rid = 0;
};

struct SoftPd {
  ibv_pd pd;
  uint64_t rid = 0;  // device mode
};

struct SoftMr {
  ibv_mr mr;
  uint64_t rid = 0;              // device mode
  std::vector<uint64_t> shared;  // device mode: the shared page runs the MR holds
};

namespace client = softmrc::client;
namespace devproto = softmrc::devproto;

// The connection of a device-mode verbs context (nullptr: the in-process device).
client::Conn* conn_of(ibv_context* ctx) {
  return reinterpret_cast<SoftContext*>(ctx)->conn;
}

// Sends a verbs request on a device-mode context; the result as verbs returns it (an errno
// value), with errno set.
int verbs_call(client::Conn* c, devproto::Writer& w, client::Reply& rep) {
  if (!client::rpc(c, w, rep)) return errno = EIO;
  if (rep.rc != 0) errno = rep.err ? rep.err : rep.rc;
  return rep.rc == 0 ? 0 : (rep.rc > 0 ? rep.rc : errno);
}

devproto::Writer verbs_req(devproto::Op op, uint64_t rid) {
  devproto::Writer w;
  w.put<uint32_t>(static_cast<uint32_t>(op)).put<uint64_t>(rid);
  return w;
}

std::mutex g_mu;
ibv_device g_soft_device{};
std::set<ibv_context*> g_contexts;
std::set<ibv_pd*> g_pds;
std::set<ibv_mr*> g_mrs;
std::map<ibv_device**, ibv_device**> g_real_lists;  // our list -> libibverbs' list

template <typename Fn>
Fn next_symbol(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}

void init_soft_device() {
  static std::once_flag once;
  std::call_once(once, [] {
    g_soft_device.node_type = IBV_NODE_CA;
    g_soft_device.transport_type = IBV_TRANSPORT_IB;
    std::snprintf(g_soft_device.name, sizeof g_soft_device.name, "softmrc0");
    std::snprintf(g_soft_device.dev_name, sizeof g_soft_device.dev_name, "softmrc0");
    std::snprintf(g_soft_device.dev_path, sizeof g_soft_device.dev_path, "/dev/null");
    std::snprintf(g_soft_device.ibdev_path, sizeof g_soft_device.ibdev_path, "/dev/null");
  });
}

bool ours(ibv_context* c) {
  std::lock_guard<std::mutex> lk(g_mu);
  return g_contexts.count(c) != 0;
}
bool ours(ibv_pd* p) {
  std::lock_guard<std::mutex> lk(g_mu);
  return g_pds.count(p) != 0;
}
bool ours(ibv_mr* m) {
  std::lock_guard<std::mutex> lk(g_mu);
  return g_mrs.count(m) != 0;
}

ibv_mtu mtu_enum(uint32_t bytes) {
  if (bytes >= 4096) return IBV_MTU_4096;
  if (bytes >= 2048) return IBV_MTU_2048;
  if (bytes >= 1024) return IBV_MTU_1024;
  if (bytes >= 512) return IBV_MTU_512;
  return IBV_MTU_256;
}

// The largest RoCE payload MTU an interface MTU carries (IPv6 40 + UDP 8 + BTH and MRC
// headers, ICRC: 128 bytes is enough for every MRP0 data packet with an SRH).
uint32_t payload_mtu(uint32_t iface_mtu) {
  return iface_mtu > 128 ? iface_mtu - 128 : 0;
}

// Device memory accesses the engine understands; the optional range (relaxed ordering and the
// like) are hints a provider may ignore, as verbs defines them.
constexpr unsigned kKnownAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                  IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

// ---- Real (rdma-core) devices: attaching to rxe

// rxe's vendor_id (drivers/infiniband/sw/rxe/rxe_param.h, RXE_VENDOR_ID): hardware RoCE NICs
// take UDP 4791 in the NIC, where an AF_PACKET socket never sees it, so only rxe is attached.
constexpr uint32_t kRxeVendorId = 0xFFFFFF;

// A real MR and what the engine needs beyond struct ibv_mr.
struct RealMr {
  unsigned access = 0;
  uint64_t iova = 0;
  bool in_engine = false;
};

std::mutex g_attach_mu;  // serialises attaching and real MR (de)registration; before g_mu
std::map<ibv_context*, softmrc_device*> g_attached;  // guarded by g_mu
std::map<ibv_mr*, RealMr> g_real_mrs;                // guarded by g_mu

bool is_zero(const wire::Ipv6Addr& a) {
  return std::all_of(a.begin(), a.end(), [](uint8_t b) { return b == 0; });
}

bool is_v4_mapped(const wire::Ipv6Addr& a) {
  static constexpr uint8_t kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};
  return std::memcmp(a.data(), kPrefix, 12) == 0;
}

// The attach description of an rxe context from the device's own queries; false (with why) for
// any other device or an rxe device the engine cannot speak on.
bool rxe_spec(ibv_context* ctx, softmrc::AttachSpec& spec, std::string& why) {
  auto query_device = next_symbol<int (*)(ibv_context*, ibv_device_attr*)>("ibv_query_device");
  auto query_port =
      next_symbol<int (*)(ibv_context*, uint8_t, _compat_ibv_port_attr*)>("ibv_query_port");
  auto device_name = next_symbol<const char* (*)(ibv_device*)>("ibv_get_device_name");
  // rdma-core >= 32 (the GID type and netdev of an entry; lib_mrc.so does not link libibverbs)
  auto query_gid_ex =
      next_symbol<int (*)(ibv_context*, uint32_t, uint32_t, ibv_gid_entry*, uint32_t, size_t)>(
          "_ibv_query_gid_ex");
  if (!query_device || !query_port || !device_name || !query_gid_ex)
    return why = "libibverbs (rdma-core >= 32) not loaded", false;
  ibv_device_attr da{};
  if (query_device(ctx, &da) != 0) return why = "ibv_query_device failed", false;
  const char* name = device_name(ctx->device);
  spec.name = name ? name : "?";
  if (da.vendor_id != kRxeVendorId)
    return why =
               spec.name + " is not an rxe device (vendor_id " + std::to_string(da.vendor_id) + ")",
           false;
  const int nports = std::min<int>(da.phys_port_cnt, static_cast<int>(engine::kMaxPorts));
  for (int port = 1; port <= nports; ++port) {
    ibv_port_attr pa{};
    if (query_port(ctx, static_cast<uint8_t>(port), reinterpret_cast<_compat_ibv_port_attr*>(&pa)))
      return why = spec.name + ": ibv_query_port " + std::to_string(port) + " failed", false;
    softmrc::PortInfo info;
    for (int i = 0; i < pa.gid_tbl_len; ++i) {
      ibv_gid_entry e{};
      softmrc::GidEntry g;  // an empty slot stays a zero RoCE v1 entry: indexes are rxe's
      g.roce_v2 = false;
      if (query_gid_ex(ctx, static_cast<uint32_t>(port), static_cast<uint32_t>(i), &e, 0,
                       sizeof e) == 0) {
        std::memcpy(g.gid.data(), e.gid.raw, 16);
        g.roce_v2 = e.gid_type == IBV_GID_TYPE_ROCE_V2;
        char ifname[IF_NAMESIZE] = {};
        if (info.iface.empty() && e.ndev_ifindex != 0 && if_indextoname(e.ndev_ifindex, ifname))
          info.iface = ifname;
        if (g.roce_v2 && !is_zero(g.gid) && !softmrc::is_link_local(g.gid) &&
            !is_v4_mapped(g.gid) && is_zero(spec.node_gid))
          spec.node_gid = g.gid;
      }
      info.gids.push_back(g);
    }
    if (info.iface.empty())
      return why = spec.name + ": no netdev behind the GIDs of port " + std::to_string(port), false;
    spec.ports.push_back(std::move(info));
  }
  if (spec.ports.empty()) return why = spec.name + ": no port", false;
  if (is_zero(spec.node_gid))
    return why = spec.name +
                 ": no global IPv6 RoCE v2 GID (SoftMRC speaks RoCEv2 over IPv6; add an IPv6 "
                 "address to " +
                 spec.ports[0].iface + ")",
           false;
  return true;
}

// Registers a real MR in an attached device's engine with rxe's keys and the MR's PD.
engine::Status engine_register(softmrc_device* dev, ibv_mr* mr, const RealMr& rec) {
  if (rec.iova != reinterpret_cast<uintptr_t>(mr->addr))
    return engine::Status::Error(EOPNOTSUPP, "MRC addresses MRs by their host VA, not an iova");
  engine::Status st;
  engine::MemoryRegion out;
  dev->with_engine(
      [&](engine::Endpoint& ep) {
        st = ep.register_mr_with_keys(mr->addr, mr->length, rec.access & kKnownAccess, mr->lkey,
                                      mr->rkey, out, mr->pd->handle);
      },
      false);
  return st;
}

// The attached device of a real context (attaching on first use), or nullptr (errno ENODEV, or
// the attach's error) for a device that is not rxe.
softmrc_device* attached_device(ibv_context* ctx) {
  {
    std::lock_guard<std::mutex> lk(g_mu);
    if (auto it = g_attached.find(ctx); it != g_attached.end()) return it->second;
  }
  std::lock_guard<std::mutex> attach_lk(g_attach_mu);
  {
    std::lock_guard<std::mutex> lk(g_mu);
    if (auto it = g_attached.find(ctx); it != g_attached.end()) return it->second;
  }
  softmrc::AttachSpec spec;
  std::string why;
  if (!rxe_spec(ctx, spec, why)) {
    if (softmrc::debug_enabled()) std::fprintf(stderr, "softmrc: not attached: %s\n", why.c_str());
    errno = ENODEV;
    return nullptr;
  }
  softmrc_device* dev = softmrc::attach_device(spec);
  if (dev == nullptr) {
    const int e = errno;
    std::fprintf(stderr, "softmrc: attaching to %s failed: %s\n", spec.name.c_str(),
                 std::strerror(e));
    errno = e;
    return nullptr;
  }
  std::vector<std::pair<ibv_mr*, RealMr*>> earlier;  // MRs registered before the attach
  {
    std::lock_guard<std::mutex> lk(g_mu);
    for (auto& [mr, rec] : g_real_mrs)
      if (mr->context == ctx) earlier.emplace_back(mr, &rec);
  }
  for (auto& [mr, rec] : earlier) {
    const engine::Status st = engine_register(dev, mr, *rec);
    if (st.ok())
      rec->in_engine = true;
    else
      std::fprintf(stderr, "softmrc: %s: MR lkey 0x%x stays unknown to MRC: %s\n",
                   spec.name.c_str(), mr->lkey, st.message.c_str());
  }
  std::lock_guard<std::mutex> lk(g_mu);
  g_attached[ctx] = dev;
  return dev;
}

// After a real ibv_reg_mr*: remembers the MR and, on an attached device, puts it in the engine.
// Idempotent (libibverbs' ibv_reg_mr may reach ibv_reg_mr_iova2 through our export).
ibv_mr* note_real_mr(ibv_mr* mr, uint64_t iova, unsigned access) {
  if (mr == nullptr) return nullptr;
  softmrc_device* dev = nullptr;
  RealMr* rec = nullptr;
  {
    std::lock_guard<std::mutex> lk(g_mu);
    if (g_real_mrs.count(mr)) return mr;
    rec = &g_real_mrs[mr];
    rec->access = access;
    rec->iova = iova;
    if (auto it = g_attached.find(mr->context); it != g_attached.end()) dev = it->second;
  }
  if (dev != nullptr) {
    const engine::Status st = engine_register(dev, mr, *rec);
    if (st.ok())
      rec->in_engine = true;
    else
      std::fprintf(stderr, "softmrc: MR lkey 0x%x stays unknown to MRC: %s\n", mr->lkey,
                   st.message.c_str());
  }
  return mr;
}

}  // namespace

namespace softmrc {
softmrc_device* device_of(ibv_context* ctx) {
  {
    std::lock_guard<std::mutex> lk(g_mu);
    if (g_contexts.count(ctx)) return reinterpret_cast<SoftContext*>(ctx)->dev;
  }
  return ctx != nullptr ? attached_device(ctx) : nullptr;
}

namespace client {
uint64_t vctx_rid(ibv_context* ctx, Conn** conn) {
  std::lock_guard<std::mutex> lk(g_mu);
  if (!g_contexts.count(ctx)) return 0;
  auto* sc = reinterpret_cast<SoftContext*>(ctx);
  if (conn) *conn = sc->conn;
  return sc->conn ? sc->rid : 0;
}

uint64_t pd_rid(ibv_pd* pd) {
  std::lock_guard<std::mutex> lk(g_mu);
  if (!g_pds.count(pd) || !reinterpret_cast<SoftContext*>(pd->context)->conn) return 0;
  return reinterpret_cast<SoftPd*>(pd)->rid;
}
}  // namespace client
}  // namespace softmrc

extern "C" {

__attribute__((visibility("default"))) ibv_device** ibv_get_device_list(int* num_devices) {
  init_soft_device();
  using Fn = ibv_device** (*)(int*);
  ibv_device** real = nullptr;
  int nreal = 0;
  const char* no_real = std::getenv("MRC_SOFT_ONLY");
  if (no_real == nullptr || *no_real == '\0' || *no_real == '0') {
    if (auto fn = next_symbol<Fn>("ibv_get_device_list")) real = fn(&nreal);
  }
  if (real == nullptr) nreal = 0;
  auto** list =
      static_cast<ibv_device**>(std::calloc(static_cast<size_t>(nreal) + 2, sizeof(void*)));
  if (list == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  list[0] = &g_soft_device;
  for (int i = 0; i < nreal; ++i) list[i + 1] = real[i];
  {
    std::lock_guard<std::mutex> lk(g_mu);
    g_real_lists[list] = real;
  }
  if (num_devices) *num_devices = nreal + 1;
  return list;
}

__attribute__((visibility("default"))) void ibv_free_device_list(ibv_device** list) {
  ibv_device** real = nullptr;
  bool found = false;
  {
    std::lock_guard<std::mutex> lk(g_mu);
    auto it = g_real_lists.find(list);
    if (it != g_real_lists.end()) {
      real = it->second;
      g_real_lists.erase(it);
      found = true;
    }
  }
  if (!found) {
    if (auto fn = next_symbol<void (*)(ibv_device**)>("ibv_free_device_list")) fn(list);
    return;
  }
  if (real != nullptr)
    if (auto fn = next_symbol<void (*)(ibv_device**)>("ibv_free_device_list")) fn(real);
  std::free(list);
}

__attribute__((visibility("default"))) const char* ibv_get_device_name(ibv_device* device) {
  if (device == &g_soft_device) return g_soft_device.name;
  if (auto fn = next_symbol<const char* (*)(ibv_device*)>("ibv_get_device_name")) return fn(device);
  return nullptr;
}

__attribute__((visibility("default"))) __be64 ibv_get_device_guid(ibv_device* device) {
  if (device == &g_soft_device) return 0;
  if (auto fn = next_symbol<__be64 (*)(ibv_device*)>("ibv_get_device_guid")) return fn(device);
  return 0;
}

__attribute__((visibility("default"))) ibv_context* ibv_open_device(ibv_device* device) {
  if (device != &g_soft_device) {
    if (auto fn = next_symbol<ibv_context* (*)(ibv_device*)>("ibv_open_device")) return fn(device);
    return fail_null(ENODEV, "ibv_open_device: unknown device");
  }
  softmrc_device* dev = nullptr;
  client::Conn* conn = nullptr;
  uint64_t rid = 0;
  if (client::device_socket() != nullptr) {
    // Device mode: the node's device lives in softmrcd.
    conn = client::open_conn();
    if (conn == nullptr) return nullptr;
    devproto::Writer w;
    w.put<uint32_t>(static_cast<uint32_t>(devproto::Op::kOpenDevice));
    client::Reply rep;
    if (verbs_call(conn, w, rep) != 0) {
      const int e = errno;
      client::close_conn(conn);
      errno = e;
      return nullptr;
    }
    rid = rep.reader().get<uint64_t>();
  } else {
    dev = softmrc::open_device();
    if (dev == nullptr) return nullptr;
  }
  auto* sc = new SoftContext{};
  sc->dev = dev;
  sc->conn = conn;
  sc->rid = rid;
  sc->ctx.device = device;
  sc->ctx.cmd_fd = -1;
  sc->ctx.async_fd = -1;
  sc->ctx.num_comp_vectors = 1;
  pthread_mutex_init(&sc->ctx.mutex, nullptr);
  sc->ctx.abi_compat = nullptr;  // not an extended context: inline wrappers call our exports
  std::lock_guard<std::mutex> lk(g_mu);
  g_contexts.insert(&sc->ctx);
  return &sc->ctx;
}

__attribute__((visibility("default"))) int ibv_close_device(ibv_context* context) {
  if (!ours(context)) {
    softmrc_device* attached = nullptr;
    {
      std::lock_guard<std::mutex> lk(g_mu);
      if (auto it = g_attached.find(context); it != g_attached.end()) {
        attached = it->second;
        g_attached.erase(it);
      }
      for (auto it = g_real_mrs.begin(); it != g_real_mrs.end();)
        it = it->first->context == context ? g_real_mrs.erase(it) : std::next(it);
    }
    if (attached != nullptr) softmrc::detach_device(attached);
    if (auto fn = next_symbol<int (*)(ibv_context*)>("ibv_close_device")) return fn(context);
    return fail(EINVAL, "ibv_close_device");
  }
  auto* sc = reinterpret_cast<SoftContext*>(context);
  {
    std::lock_guard<std::mutex> lk(g_mu);
    g_contexts.erase(context);
  }
  if (sc->conn != nullptr) {
    client::Reply rep;
    auto w = verbs_req(devproto::Op::kCloseDevice, sc->rid);
    (void)verbs_call(sc->conn, w, rep);
    client::close_conn(sc->conn);
  } else {
    softmrc::close_device(sc->dev);
  }
  pthread_mutex_destroy(&sc->ctx.mutex);
  delete sc;
  return 0;
}

__attribute__((visibility("default"))) int ibv_query_device(ibv_context* context,
                                                            ibv_device_attr* attr) {
  if (!ours(context)) {
    if (auto fn = next_symbol<int (*)(ibv_context*, ibv_device_attr*)>("ibv_query_device"))
      return fn(context, attr);
    return EINVAL;
  }
  if (client::Conn* c = conn_of(context)) {
    client::Reply rep;
    auto w = verbs_req(devproto::Op::kQueryDevice, reinterpret_cast<SoftContext*>(context)->rid);
    if (const int rc = verbs_call(c, w, rep)) return rc;
    return rep.reader().blob(*attr) ? 0 : EPROTO;
  }
  softmrc_device* dev = softmrc::device_of(context);
  const auto& caps = softmrc::device_caps();
  std::memset(attr, 0, sizeof *attr);
  std::snprintf(attr->fw_ver, sizeof attr->fw_ver, "softmrc-1.0");
  std::memcpy(&attr->node_guid, dev->node_gid.data() + 8, 8);
  attr->sys_image_guid = attr->node_guid;
  attr->max_mr_size = UINT64_MAX;
  attr->page_size_cap = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  attr->vendor_id = 0;
  attr->max_qp = static_cast<int>(caps.max_qp);
  attr->max_qp_wr = static_cast<int>(caps.max_send_wr);
  attr->max_sge = static_cast<int>(engine::kMaxSge);
  attr->max_cq = 1 << 16;
  attr->max_cqe = static_cast<int>(caps.max_cqe);
  attr->max_mr = 1 << 20;
  attr->max_pd = 1 << 16;
  attr->phys_port_cnt = static_cast<uint8_t>(dev->ports.size());
  return 0;
}

__attribute__((visibility("default"))) int ibv_query_port(ibv_context* context, uint8_t port_num,
                                                          struct _compat_ibv_port_attr* cattr) {
  if (!ours(context)) {
    if (auto fn =
            next_symbol<int (*)(ibv_context*, uint8_t, _compat_ibv_port_attr*)>("ibv_query_port"))
      return fn(context, port_num, cattr);
    return EINVAL;
  }
  if (client::Conn* c = conn_of(context)) {
    client::Reply rep;
    auto w = verbs_req(devproto::Op::kQueryPort, reinterpret_cast<SoftContext*>(context)->rid);
    w.put<uint8_t>(port_num);
    if (const int rc = verbs_call(c, w, rep)) return rc;
    ibv_port_attr a{};
    if (!rep.reader().blob(a)) return EPROTO;
    // Only the fields the in-process device writes (up to link_layer): older callers pass
    // the original, shorter ibv_port_attr.
    std::memcpy(cattr, &a, offsetof(ibv_port_attr, link_layer) + sizeof a.link_layer);
    return 0;
  }
  softmrc_device* dev = softmrc::device_of(context);
  if (port_num == 0 || port_num > dev->ports.size()) return EINVAL;
  const softmrc::PortInfo& p = dev->ports[port_num - 1];
  // Only the fields of the original (compat) ibv_port_attr: older callers pass that size.
  auto* attr = reinterpret_cast<ibv_port_attr*>(cattr);
  bool up = p.admin_enabled;
  if (up && dev->io) {
    mrc::runtime::IfaceInfo info;
    up = mrc::runtime::query_iface(p.iface, info).ok() && info.up;
  }
  attr->state = up ? IBV_PORT_ACTIVE : IBV_PORT_DOWN;
  attr->max_mtu = IBV_MTU_4096;
  attr->active_mtu = mtu_enum(payload_mtu(p.mtu));
  attr->gid_tbl_len = static_cast<int>(p.gids.size());
  attr->port_cap_flags = 0;
  attr->max_msg_sz = 1u << 31;
  attr->pkey_tbl_len = 1;
  attr->phys_state = up ? 5 : 3;  // LinkUp / Disabled
  attr->active_width = 1;         // 1x
  attr->active_speed = 32;        // reported as 25 Gb/s; a software port has no line rate
  attr->link_layer = IBV_LINK_LAYER_ETHERNET;
  return 0;
}

__attribute__((visibility("default"))) int ibv_query_gid(ibv_context* context, uint8_t port_num,
                                                         int index, ibv_gid* gid) {
  if (!ours(context)) {
    if (auto fn = next_symbol<int (*)(ibv_context*, uint8_t, int, ibv_gid*)>("ibv_query_gid"))
      return fn(context, port_num, index, gid);
    return fail(EINVAL, "ibv_query_gid");
  }
  if (client::Conn* c = conn_of(context)) {
    client::Reply rep;
    auto w = verbs_req(devproto::Op::kQueryGid, reinterpret_cast<SoftContext*>(context)->rid);
    w.put<uint8_t>(port_num).put<int32_t>(index);
    if (verbs_call(c, w, rep) != 0) return -1;
    return rep.reader().blob(*gid) ? 0 : fail(EPROTO, "ibv_query_gid");
  }
  softmrc_device* dev = softmrc::device_of(context);
  if (port_num == 0 || port_num > dev->ports.size())
    return fail(EINVAL, "ibv_query_gid: no such port");
  const auto& table = dev->ports[port_num - 1].gids;
  if (index < 0 || static_cast<size_t>(index) >= table.size())
    return fail(EINVAL, "ibv_query_gid: index beyond the GID table");
  std::memcpy(gid->raw, table[static_cast<size_t>(index)].gid.data(), 16);
  return 0;
}

__attribute__((visibility("default"))) ibv_pd* ibv_alloc_pd(ibv_context* context) {
  if (!ours(context)) {
    if (auto fn = next_symbol<ibv_pd* (*)(ibv_context*)>("ibv_alloc_pd")) return fn(context);
    return fail_null(EINVAL, "ibv_alloc_pd");
  }
  auto* p = new SoftPd{};
  p->pd.context = context;
  if (client::Conn* c = conn_of(context)) {
    client::Reply rep;
    auto w = verbs_req(devproto::Op::kAllocPd, reinterpret_cast<SoftContext*>(context)->rid);
    if (verbs_call(c, w, rep) != 0) {
      delete p;
      return nullptr;
    }
    devproto::Reader r = rep.reader();
    p->rid = r.get<uint64_t>();
    p->pd.handle = r.get<uint32_t>();
  } else {
    softmrc_device* dev = softmrc::device_of(context);
    std::lock_guard<std::mutex> lk(dev->mu);
    p->pd.handle = dev->next_pd++;
  }
  std::lock_guard<std::mutex> lk(g_mu);
  g_pds.insert(&p->pd);
  return &p->pd;
}

__attribute__((visibility("default"))) int ibv_dealloc_pd(ibv_pd* pd) {
  if (!ours(pd)) {
    if (auto fn = next_symbol<int (*)(ibv_pd*)>("ibv_dealloc_pd")) return fn(pd);
    return EINVAL;
  }
  {
    std::lock_guard<std::mutex> lk(g_mu);
    for (ibv_mr* m : g_mrs)
      if (m->pd == pd) return EBUSY;  // verbs: a PD with MRs cannot go
  }
  if (client::Conn* c = conn_of(pd->context)) {
    client::Reply rep;
    auto w = verbs_req(devproto::Op::kDeallocPd, reinterpret_cast<SoftPd*>(pd)->rid);
    if (const int rc = verbs_call(c, w, rep); rc != 0 && !c->dead) return rc;
  }
  std::lock_guard<std::mutex> lk(g_mu);
  g_pds.erase(pd);
  delete reinterpret_cast<SoftPd*>(pd);
  return 0;
}

__attribute__((visibility("default"))) ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr,
                                                                size_t length, uint64_t iova,
                                                                unsigned int access) {
  if (!ours(pd)) {
    if (auto fn = next_symbol<ibv_mr* (*)(ibv_pd*, void*, size_t, uint64_t, unsigned)>(
            "ibv_reg_mr_iova2")) {
      std::lock_guard<std::mutex> attach_lk(g_attach_mu);
      return note_real_mr(fn(pd, addr, length, iova, access), iova, access);
    }
    return fail_null(EINVAL, "ibv_reg_mr");
  }
  if (iova != reinterpret_cast<uintptr_t>(addr))
    return fail_null(EOPNOTSUPP, "ibv_reg_mr_iova: SoftMRC MRs are addressed by their host VA");
  const unsigned access_known = access & ~static_cast<unsigned>(IBV_ACCESS_OPTIONAL_RANGE);
  if (access_known & ~kKnownAccess)
    return fail_null(EINVAL, "ibv_reg_mr: unsupported access flags");
  if (client::Conn* c = conn_of(pd->context)) {
    // Device mode: the pages of [addr, addr+length) become a sealed memfd that the device
    // process maps at the same addresses (README.md, "Memory in device mode").
    if (length == 0) return fail_null(EINVAL, "ibv_reg_mr: length 0");
    std::vector<uint64_t> starts, lens, refs;
    std::vector<int> fds;
    const auto a = reinterpret_cast<uint64_t>(addr);
    if (client::share_range(c, a, length, starts, lens, fds, refs) != 0)
      return fail_null(errno, "ibv_reg_mr: sharing the pages with the device");
    auto w = verbs_req(devproto::Op::kRegMr, reinterpret_cast<SoftPd*>(pd)->rid);
    w.put<uint64_t>(a).put<uint64_t>(length).put<uint32_t>(access_known);
    w.put<uint32_t>(static_cast<uint32_t>(starts.size()));
    for (size_t i = 0; i < starts.size(); ++i) w.put<uint64_t>(starts[i]).put<uint64_t>(lens[i]);
    w.put<uint32_t>(static_cast<uint32_t>(refs.size()));
    for (uint64_t s : refs) w.put<uint64_t>(s);
    client::Reply rep;
    const bool sent = client::rpc(c, w, rep, fds);
    const bool ok = sent && rep.rc == 0;
    client::commit_range(c, starts, lens, fds, refs, ok);
    if (!ok) return fail_null(sent ? rep.err : EIO, "ibv_reg_mr (device)");
    devproto::Reader r = rep.reader();
    auto* m = new SoftMr{};
    m->rid = r.get<uint64_t>();
    m->mr.context = pd->context;
    m->mr.pd = pd;
    m->mr.addr = addr;
    m->mr.length = length;
    m->mr.lkey = r.get<uint32_t>();
    m->mr.rkey = r.get<uint32_t>();
    m->mr.handle = m->mr.lkey;
    m->shared = starts;
    m->shared.insert(m->shared.end(), refs.begin(), refs.end());
    std::lock_guard<std::mutex> lk(g_mu);
    g_mrs.insert(&m->mr);
    return &m->mr;
  }
  softmrc_device* dev = softmrc::device_of(pd->context);
  engine::MemoryRegion mr;
  engine::Status st;
  dev->with_engine(
      [&](engine::Endpoint& ep) {
        st = ep.register_mr(addr, length, access_known, mr, pd->handle);
      },
      false);
  if (!st.ok()) {
    softmrc::fail_status(st);
    return nullptr;
  }
  auto* m = new SoftMr{};
  m->mr.context = pd->context;
  m->mr.pd = pd;
  m->mr.addr = addr;
  m->mr.length = length;
  m->mr.handle = mr.lkey;
  m->mr.lkey = mr.lkey;
  m->mr.rkey = mr.rkey;
  std::lock_guard<std::mutex> lk(g_mu);
  g_mrs.insert(&m->mr);
  return &m->mr;
}

__attribute__((visibility("default"))) ibv_mr* ibv_reg_mr(ibv_pd* pd, void* addr, size_t length,
                                                          int access) {
  if (!ours(pd)) {
    if (auto fn = next_symbol<ibv_mr* (*)(ibv_pd*, void*, size_t, int)>("ibv_reg_mr")) {
      ibv_mr* mr = fn(pd, addr, length, access);
      std::lock_guard<std::mutex> attach_lk(g_attach_mu);
      return note_real_mr(mr, reinterpret_cast<uintptr_t>(addr), static_cast<unsigned>(access));
    }
    return fail_null(EINVAL, "ibv_reg_mr");
  }
  return ibv_reg_mr_iova2(pd, addr, length, reinterpret_cast<uintptr_t>(addr),
                          static_cast<unsigned>(access));
}

__attribute__((visibility("default"))) ibv_mr* ibv_reg_mr_iova(ibv_pd* pd, void* addr,
                                                               size_t length, uint64_t iova,
                                                               int access) {
  if (!ours(pd)) {
    if (auto fn =
            next_symbol<ibv_mr* (*)(ibv_pd*, void*, size_t, uint64_t, int)>("ibv_reg_mr_iova")) {
      ibv_mr* mr = fn(pd, addr, length, iova, access);
      std::lock_guard<std::mutex> attach_lk(g_attach_mu);
      return note_real_mr(mr, iova, static_cast<unsigned>(access));
    }
    return fail_null(EINVAL, "ibv_reg_mr_iova");
  }
  return ibv_reg_mr_iova2(pd, addr, length, iova, static_cast<unsigned>(access));
}

__attribute__((visibility("default"))) int ibv_dereg_mr(ibv_mr* mr) {
  if (!ours(mr)) {
    auto fn = next_symbol<int (*)(ibv_mr*)>("ibv_dereg_mr");
    if (!fn) return EINVAL;
    // Out of the engine before rxe can hand the key to a new MR; back in if rxe refuses.
    std::lock_guard<std::mutex> attach_lk(g_attach_mu);
    softmrc_device* dev = nullptr;
    RealMr rec;
    bool known = false;
    {
      std::lock_guard<std::mutex> lk(g_mu);
      if (auto it = g_real_mrs.find(mr); it != g_real_mrs.end()) {
        rec = it->second;
        known = true;
        if (auto at = g_attached.find(mr->context); at != g_attached.end()) dev = at->second;
      }
    }
    const uint32_t lkey = mr->lkey;
    if (dev != nullptr && rec.in_engine)
      dev->with_engine([&](engine::Endpoint& ep) { (void)ep.deregister_mr(lkey); }, false);
    const int rc = fn(mr);
    if (rc != 0) {
      if (dev != nullptr && rec.in_engine) (void)engine_register(dev, mr, rec);
      return rc;
    }
    if (known) {
      std::lock_guard<std::mutex> lk(g_mu);
      g_real_mrs.erase(mr);
    }
    return 0;
  }
  if (client::Conn* c = conn_of(mr->context)) {
    auto* sm = reinterpret_cast<SoftMr*>(mr);
    client::Reply rep;
    auto w = verbs_req(devproto::Op::kDeregMr, sm->rid);
    if (const int rc = verbs_call(c, w, rep); rc != 0 && !c->dead) return rc;
    client::release_range(c, sm->shared);
    std::lock_guard<std::mutex> lk(g_mu);
    g_mrs.erase(mr);
    delete sm;
    return 0;
  }
  softmrc_device* dev = softmrc::device_of(mr->context);
  engine::Status st;
  if (dev != nullptr)
    dev->with_engine([&](engine::Endpoint& ep) { st = ep.deregister_mr(mr->lkey); }, false);
  std::lock_guard<std::mutex> lk(g_mu);
  g_mrs.erase(mr);
  delete reinterpret_cast<SoftMr*>(mr);
  return 0;
}

}  // extern "C"
