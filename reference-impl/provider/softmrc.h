// SoftMRC internals: the objects behind the opaque handles of mrc.h / mrc_ctl.h and the verbs
// objects lib_mrc.so hands out for its software device. Private header of lib_mrc.so.
//
// One Device per process: the software MRC NIC (in softmrcd, the node's device process, or in
// the application itself without MRC_SOFT_DEVICE; client.h is the device-mode side). Its ports are
// network interfaces (planes); its data path is one reference engine (reference-impl/engine) put on
// the wire by the runtime (reference-impl/runtime): a loop thread owns the sockets, and application
// threads reach the engine between two loop iterations (Runtime::with_engine), like a doorbell.
// Completions, asynchronous events, EV events and endpoint responses are moved out of the engine by
// the loop's app hook into the provider's own queues, so polling a CQ never waits for the loop.
//
// Locking: engine lock (the runtime's) before Device::mu before any object's own mutex.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "mrc.h"
#include "mrc_ctl.h"
#include "reference-impl/engine/engine.h"
#include "reference-impl/provider/cq_ring.h"
#include "reference-impl/runtime/runtime.h"

namespace softmrc::client {
struct Conn;
}

namespace softmrc {

namespace engine = mrc::engine;
namespace wire = mrc::wire;

// Sets errno and returns -1 (for the int-returning API calls).
int fail(int err, const char* what);
// Sets errno, returns nullptr.
std::nullptr_t fail_null(int err, const char* what);
// Turns an engine Status into errno (logged when MRC_SOFT_DEBUG is set).
int fail_status(const engine::Status& s);
bool debug_enabled();

// fe80::/10: never a node GID (the engine sends from a routable address).
inline bool is_link_local(const wire::Ipv6Addr& a) {
  return a[0] == 0xFE && (a[1] & 0xC0) == 0x80;
}

struct GidEntry {
  wire::Ipv6Addr gid{};
  bool roce_v2 = true;
};

struct PortInfo {
  std::string iface;
  std::vector<GidEntry> gids;  // the GID table of the port
  uint32_t mtu = 1500;
  bool admin_enabled = true;
};

// EV format, EV and CC profiles of mrc_ctl.h with their INIT/OFFLINE/ONLINE state.
struct FmtProfile {
  mrc_ctl_profile_state state = MRC_CTL_PROFILE_INIT;
  bool have_mode = false;
  mrc_ctl_ev_fmt_mode mode = MRC_CTL_EV_FMT_MODE_STEV;
  std::vector<uint32_t> widths;
};

struct EvProfileRec {
  mrc_ctl_profile_state state = MRC_CTL_PROFILE_INIT;
  bool have_mode = false, have_fmt = false, have_count = false, have_fields = false;
  bool have_min_active = false, have_event_mask = false;
  mrc_ctl_ev_mode mode = MRC_CTL_EV_MODE_GEN;
  uint64_t fmt_id = 0;
  uint32_t count = 0;
  uint32_t min_active = 0;
  int event_mask = 0;
  std::vector<mrc_ctl_ev_field> fields;
  // The profile's EV array: explicit EVs as the controller replaced them, or the EVs generated
  // when the profile went ONLINE. Shared by every QP of the profile.
  std::vector<mrc_ctl_ev> evs;
  std::map<std::pair<uint32_t, uint8_t>, size_t> index_of_wev;  // (wev, port) -> index in evs
  std::set<size_t> denied;                                      // indexes the controller denied
  std::optional<uint64_t> engine_id;  // registered in the engine while ONLINE
};

struct CcProfileRec {
  mrc_ctl_profile_state state = MRC_CTL_PROFILE_INIT;
  bool have_algorithm = false;
  std::string algorithm;  // "" = no CC
  bool have_config = false;
  engine::NsccConfig nscc;
  mrc_ctl_cc_nscc_cfg cfg_copy{};  // what queries point cc_config at
  std::optional<uint64_t> engine_id;
};

}  // namespace softmrc

// The opaque handles of mrc.h, defined in the global namespace as the C API names them.
struct mrc_comp_channel;
struct mrc_cq {
  mrc_context* ctx = nullptr;
  bool ev_event_cq = false;
  uint32_t engine_cq = 0;
  int cqe = 0;
  void* cq_context = nullptr;
  mrc_comp_channel* channel = nullptr;
  std::mutex mu;
  std::deque<ibv_wc> wcs;
  std::deque<mrc_ctl_ev_event> ev_events;
  uint32_t ev_drops = 0;  // EV events lost since the last one queued
  bool overrun = false;
  bool armed = false;
  std::atomic<uint64_t> events_delivered{0};
  std::atomic<uint64_t> events_acked{0};
  std::condition_variable acked_cv;
  uint64_t rid = 0;  // device mode: the device process's handle
  // Device mode, in softmrcd: completions go to the application's ring instead of `wcs`.
  std::unique_ptr<softmrc::cq_ring::Producer> ring;
  // Device mode, in the application: the ring it polls, and whether the device only moves
  // on a poll request (MRC_SOFT_IO=loopback has no loop thread).
  std::unique_ptr<softmrc::cq_ring::Consumer> ring_rx;
  bool poll_drives = false;
  uint32_t empty_polls = 0;  // consecutive empty polls of ring_rx (under mu)
};

struct mrc_comp_channel {
  mrc_context* ctx = nullptr;
  int fd = -1;  // eventfd (semaphore mode): one count per CQ event queued
  std::mutex mu;
  std::deque<mrc_cq*> events;
  int cqs = 0;  // CQs attached
  uint64_t rid = 0;
};

struct mrc_qp_hint {
  mrc_context* ctx = nullptr;
  mrc_qp_hint_attr attr{};
  int qps = 0;  // QPs that name it
  uint64_t rid = 0;
};

struct mrc_qp {
  mrc_context* ctx = nullptr;
  uint32_t qpn = 0;
  mrc_qp_init_attr init{};
  mrc_qp_hint* hint = nullptr;
  std::optional<uint64_t> ev_profile_id;  // controller id named at INIT
  std::optional<uint64_t> cc_profile_id;
  uint8_t port_num = 1;  // IBV_QP_PORT as given (ignored by the data path)
  uint8_t sgid_index = 0;
  uint32_t vendor_cfg_set = 0;
  uint8_t vendor_cfg[MRC_MAX_VENDOR_CFG_SIZE] = {};
  uint64_t rid = 0;
};

struct mrc_context {
  struct softmrc_device* dev = nullptr;
  ibv_context* vctx = nullptr;
  uint32_t api_version = 0;
  uint32_t vendor_api_version = 0;
  // Objects of this context (another context's handles are refused).
  std::set<mrc_cq*> cqs;
  std::set<mrc_qp*> qps;
  std::set<mrc_qp_hint*> hints;
  std::set<mrc_comp_channel*> channels;
  // Asynchronous events: queued by the loop, one eventfd count each.
  std::mutex async_mu;
  std::deque<mrc_async_event> async_events;
  int async_fd = -1;
  // Device mode (client.h): the connection, the device's handle, and the CC configurations
  // queries point cc_config at.
  softmrc::client::Conn* conn = nullptr;
  uint64_t rid = 0;
  std::map<uint64_t, mrc_ctl_cc_nscc_cfg> cc_cfgs;
};

// The device: one per process (see the file comment).
struct softmrc_device {
  std::mutex mu;  // every field below but the runtime's engine
  int refs = 0;   // open ibv_contexts
  std::string name = "softmrc0";
  std::vector<softmrc::PortInfo> ports;
  mrc::wire::Ipv6Addr node_gid{};
  mrc::wire::EvFormat ev_format = mrc::wire::EvFormat::kStev;
  bool io = true;  // false: MRC_SOFT_IO=loopback, frames go back to the engine (tests)
  std::unique_ptr<mrc::runtime::Runtime> rt;
  std::unique_ptr<mrc::engine::Endpoint> bare;  // the engine when !io
  std::mutex bare_mu;
  std::set<mrc_context*> contexts;
  std::map<uint32_t, mrc_qp*> qp_by_qpn;
  std::map<uint32_t, mrc_cq*> cq_by_engine_id;
  std::map<uint64_t, softmrc::FmtProfile> fmt_profiles;
  std::map<uint64_t, softmrc::EvProfileRec> ev_profiles;
  std::map<uint64_t, softmrc::CcProfileRec> cc_profiles;
  std::map<uint64_t, int> ev_profile_users;  // controller id -> QPs naming it
  std::map<uint64_t, int> cc_profile_users;
  uint64_t next_engine_profile_id = 1;
  uint64_t default_ev_engine_id = 0;  // used by QPs that name no EV profile
  uint64_t default_cc_engine_id = 0;
  // Endpoint responses moved out of the engine by the loop.
  std::condition_variable ep_cv;
  std::deque<mrc::engine::EpResponse> ep_responses;
  std::vector<mrc_cq*> ev_event_cqs;
  uint32_t next_pd = 1;

  // Runs fn with the engine, from an application thread (never from the loop thread).
  void with_engine(const std::function<void(mrc::engine::Endpoint&)>& fn, bool wake = true);
};

namespace softmrc {

// The device behind a verbs context of ours, or nullptr when the context is not ours.
softmrc_device* device_of(ibv_context* ctx);
// Opens (or takes a reference on) the process's device. nullptr with errno set on failure.
softmrc_device* open_device();
void close_device(softmrc_device* dev);
// An MRC device on an rdma-core device (rxe): its name, ports (one per device port: the netdev
// behind its GIDs, with the device's GID table index for index) and the RoCE v2 GID the engine
// sends from. verbs.cc builds it from the device's own queries; the device is not the process's
// software device but one per attached ibv_context.
struct AttachSpec {
  std::string name;
  std::vector<PortInfo> ports;
  wire::Ipv6Addr node_gid{};
};
softmrc_device* attach_device(const AttachSpec& spec);  // nullptr with errno set on failure
void detach_device(softmrc_device* dev);
// The engine's loop hook: drains completions, async events and endpoint responses.
void drain_engine(softmrc_device* dev, engine::Endpoint& ep);
// Engine events -> EV events of the controller.
void on_engine_event(softmrc_device* dev, const engine::Event& e);
// Device attributes the engine offers.
const engine::DeviceCaps& device_caps();
bool has_cap_net_admin();
// In the device process: for one request, CAP_NET_ADMIN is the requesting process's (from its
// credentials), not the device process's own.
class ScopedCallerCaps {
 public:
  explicit ScopedCallerCaps(bool cap_net_admin);
  ~ScopedCallerCaps();
  ScopedCallerCaps(const ScopedCallerCaps&) = delete;
  ScopedCallerCaps& operator=(const ScopedCallerCaps&) = delete;
};
// Wire EV of a compact EV of a profile, and whether it expands (error text otherwise).
// The integer inside an enum field an application filled: it may hold any value, and loading an
// out-of-range value through the enum type is undefined behaviour in C++.
template <typename E>
uint32_t raw(const E& e) {
  static_assert(sizeof(E) == sizeof(uint32_t));
  uint32_t v;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

// Shared by mrc_api.cc and mrc_ctl_api.cc.
bool valid_ctx(mrc_context* ctx);
bool valid_cq(mrc_cq* cq);
mrc_cq* create_cq(mrc_context* ctx, int cqe, void* cq_context, mrc_comp_channel* channel,
                  int comp_vector, bool ev_cq);
bool wev_of_compact(softmrc_device* dev, const EvProfileRec& p, const mrc_ctl_ev& ev, uint32_t& wev,
                    std::string& error);

}  // namespace softmrc
