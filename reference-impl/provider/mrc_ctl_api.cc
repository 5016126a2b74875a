// mrc_ctl.h on the SoftMRC device: capability discovery, port administration, EV format / EV /
// CC profiles and their state machines, EV states, EV events, endpoint operations.
#include <arpa/inet.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <random>

#include "reference-impl/provider/client.h"
#include "reference-impl/provider/softmrc.h"

namespace engine = mrc::engine;
namespace wire = mrc::wire;

using softmrc::fail;
using softmrc::fail_null;
using softmrc::fail_status;

namespace {

constexpr uint32_t kMaxFmtProfiles = 64;
constexpr uint32_t kMaxEvProfiles = 256;
constexpr uint32_t kMaxCcProfiles = 256;
constexpr uint32_t kMaxEvsPerProfile = 4096;
constexpr uint32_t kMaxEvsTotal = 65536;
constexpr uint32_t kMaxFields = 8;

const char* g_algorithms[] = {"uet-1.0-nscc", nullptr};

uint32_t fmt_mode_bit(wire::EvFormat f) {
  switch (f) {
    case wire::EvFormat::kStev:
      return MRC_CTL_EV_FMT_MODE_STEV;
    case wire::EvFormat::kSrv6:
      return MRC_CTL_EV_FMT_MODE_SRV6;
    case wire::EvFormat::kUdp:
      return MRC_CTL_EV_FMT_MODE_UDP;
  }
  return 0;
}

uint32_t max_width(uint32_t mode) {
  return mode == MRC_CTL_EV_FMT_MODE_UDP ? 16 : mode == MRC_CTL_EV_FMT_MODE_STEV ? 32 : 256;
}

bool same_ev(const mrc_ctl_ev& a, const mrc_ctl_ev& b) {
  return a.port == b.port && std::memcmp(a.val, b.val, sizeof a.val) == 0;
}

bool unpopulated(const mrc_ctl_ev& e) {
  static const mrc_ctl_ev empty{};
  return same_ev(e, empty);
}

// Controller calls need CAP_NET_ADMIN (mrc_ctl.h); the device queries and version query do not.
bool privileged(mrc_context* ctx, const char* what) {
  if (!softmrc::valid_ctx(ctx)) {
    fail(EINVAL, what);
    return false;
  }
  if (!softmrc::has_cap_net_admin()) {
    fail(EPERM, what);
    return false;
  }
  return true;
}

uint64_t now_ns() {
  return mrc::runtime::monotonic_ns();  // the engine's clock
}

// The EV profile the engine gets when a controller profile goes ONLINE: the profile's EV array
// as explicit EVs (generated ones are drawn here, so that every QP of the profile shares one
// array, as QUERY_EV_ARRAY and EV events need).
int go_online(softmrc_device* dev, engine::Endpoint& ep, uint64_t id, softmrc::EvProfileRec& p) {
  if (!p.have_min_active || !p.have_event_mask)
    return fail(EINVAL, "EV profile to ONLINE needs MIN_ACTIVE and EVENT_MASK");
  if (p.min_active > p.count) return fail(EINVAL, "EV profile: ev_min_active > ev_count");
  engine::EvProfile ep_prof;
  const uint8_t nports = static_cast<uint8_t>(dev->ports.size());
  if (p.mode == MRC_CTL_EV_MODE_AUTO) {
    engine::EvProfile def;
    if (engine::Status s = mrc::runtime::default_ev_profile(dev->ev_format, p.count, def); !s.ok())
      return fail_status(s);
    softmrc::FmtProfile f;
    f.state = MRC_CTL_PROFILE_ONLINE;
    f.widths = def.format_widths;
    // AUTO: the device's own fields, kept under a format id no controller can name.
    p.fmt_id = UINT64_MAX;
    dev->fmt_profiles[UINT64_MAX] = f;
    p.fields.clear();
    for (const auto& fld : def.fields)
      p.fields.push_back({fld.width, fld.init_val, fld.min_val, fld.max_val, fld.mask});
  } else {
    auto fit = dev->fmt_profiles.find(p.fmt_id);
    if (fit == dev->fmt_profiles.end() || fit->second.state != MRC_CTL_PROFILE_ONLINE)
      return fail(EINVAL, "EV profile to ONLINE: its EV format profile is not ONLINE");
    if (fmt_mode_bit(dev->ev_format) != static_cast<uint32_t>(fit->second.mode))
      return fail(EINVAL, "EV profile: the format's mode is not the device's EV format");
  }
  if (p.mode == MRC_CTL_EV_MODE_GEN || p.mode == MRC_CTL_EV_MODE_AUTO) {
    if (p.fields.empty()) return fail(EINVAL, "generated EV profile without fields");
    std::mt19937_64 rng((static_cast<uint64_t>(std::random_device{}()) << 32) ^ id);
    p.evs.assign(p.count, mrc_ctl_ev{});
    for (uint32_t i = 0; i < p.count; ++i) {
      mrc_ctl_ev& e = p.evs[i];
      e.port = static_cast<uint8_t>(i % nports + 1);
      uint32_t pos = 0;
      for (const auto& f : p.fields) {
        if (f.mask == 0) continue;
        const uint32_t k = static_cast<uint32_t>(__builtin_popcount(f.mask));
        const uint64_t kmax = k >= 32 ? 0xFFFFFFFFull : ((1ull << k) - 1);
        const uint64_t hi = f.max_val == 0 ? kmax : std::min<uint64_t>(f.max_val, kmax);
        const uint64_t lo = std::min<uint64_t>(f.min_val, hi);
        const uint64_t v = lo + rng() % (hi - lo + 1);
        for (uint32_t b = 0; b < k; ++b, ++pos)  // MSB first into the compact bit stream
          if ((v >> (k - 1 - b)) & 1) e.val[pos / 8] |= static_cast<uint8_t>(0x80u >> (pos % 8));
      }
    }
  } else {
    for (const auto& e : p.evs)
      if (unpopulated(e))
        return fail(EINVAL, "explicit EV profile to ONLINE: some EVs are still unpopulated");
  }
  const auto& widths = dev->fmt_profiles[p.fmt_id].widths;
  ep_prof.mode = engine::EvMode::kExplicit;
  ep_prof.format_widths = widths;
  for (const auto& f : p.fields)
    ep_prof.fields.push_back({f.width, f.init_val, f.min_val, f.max_val, f.mask});
  if (ep_prof.fields.empty())
    for (uint32_t w : widths)
      ep_prof.fields.push_back({w, 0, 0, 0, w >= 32 ? 0xFFFFFFFFu : ((1u << w) - 1)});
  ep_prof.ev_count = p.count;
  ep_prof.ev_min_active = std::max<uint32_t>(p.min_active, 1);
  p.index_of_wev.clear();
  for (size_t i = 0; i < p.evs.size(); ++i) {
    engine::EvEntry en;
    std::memcpy(en.ev.data(), p.evs[i].val, en.ev.size());
    en.port = p.evs[i].port;
    ep_prof.explicit_evs.push_back(en);
    uint32_t wev = static_cast<uint32_t>(i);
    std::string err;
    if (dev->ev_format != wire::EvFormat::kSrv6 &&
        !softmrc::wev_of_compact(dev, p, p.evs[i], wev, err))
      return fail(EINVAL, "EV profile: an EV does not expand");
    p.index_of_wev.emplace(std::make_pair(wev, p.evs[i].port), i);
  }
  const uint64_t eid = dev->next_engine_profile_id++;
  if (engine::Status s = ep.add_ev_profile(eid, ep_prof); !s.ok()) return fail_status(s);
  p.engine_id = eid;
  return 0;
}

mrc_ctl_ev_state ev_state_now(softmrc_device* dev, engine::Endpoint& ep, uint64_t id,
                              const softmrc::EvProfileRec& p, size_t idx) {
  if (p.denied.count(idx)) return MRC_CTL_EV_DENIED;
  if (!p.engine_id) return MRC_CTL_EV_GOOD;
  uint32_t wev = 0;
  for (const auto& [key, i] : p.index_of_wev)
    if (i == idx) wev = key.first;
  mrc_ctl_ev_state st = MRC_CTL_EV_GOOD;
  for (const auto& [qpn, qp] : dev->qp_by_qpn) {
    if (qp->ev_profile_id != id) continue;
    std::vector<engine::EvInfo> infos;
    if (!ep.ev_info(qpn, infos).ok()) continue;
    for (const auto& inf : infos)
      if (inf.wev == wev && inf.port == p.evs[idx].port) {
        if (inf.state == engine::EvState::kAssumedBad) st = MRC_CTL_EV_ASSUMED_BAD;
        if (inf.state == engine::EvState::kDenied) return MRC_CTL_EV_DENIED;
      }
  }
  return st;
}

int find_ev(const softmrc::EvProfileRec& p, const mrc_ctl_ev& ev, size_t from = 0) {
  for (size_t i = from; i < p.evs.size(); ++i)
    if (same_ev(p.evs[i], ev)) return static_cast<int>(i);
  return -1;
}

int ev_op(softmrc_device* dev, engine::Endpoint& ep, uint64_t id, softmrc::EvProfileRec& p,
          mrc_ctl_ev_profile_attr& a, bool modify) {
  auto& op = a.ev_op;
  if (op.entry_count < 0 || (op.entry_count > 0 && op.entries == nullptr))
    return fail(EINVAL, "EV_OP: entries");
  const size_t nports = dev->ports.size();
  switch (softmrc::raw(op.op)) {
    case MRC_CTL_EV_OP_REPLACE_EV:
      if (!modify) return fail(EINVAL, "REPLACE_EV is a modify operation");
      if (p.state != MRC_CTL_PROFILE_OFFLINE)
        return fail(EINVAL, "REPLACE_EV needs the profile OFFLINE (no MODIFY_ONLINE capability)");
      if (p.mode != MRC_CTL_EV_MODE_EXP)
        return fail(EINVAL, "REPLACE_EV on a non-explicit profile");
      for (int k = 0; k < op.entry_count; ++k) {
        const mrc_ctl_ev_op_entry& en = op.entries[k];
        if (en.ev_new.port == 0 || en.ev_new.port > nports)
          return fail(EINVAL, "REPLACE_EV: ev_new.port is not a port of the device");
        int i = find_ev(p, en.ev);
        if (i < 0) return fail(ENOENT, "REPLACE_EV: EV not in the profile");
        do {
          p.evs[static_cast<size_t>(i)] = en.ev_new;
          if (softmrc::raw(en.state) == MRC_CTL_EV_DENIED) {
            p.denied.insert(static_cast<size_t>(i));
          } else {
            p.denied.erase(static_cast<size_t>(i));
          }
          if (!(en.flags & MRC_CTL_EV_OP_F_ALL_COPIES)) break;
          i = find_ev(p, en.ev, static_cast<size_t>(i) + 1);
        } while (i >= 0);
      }
      return 0;
    case MRC_CTL_EV_OP_MODIFY_EV_STATE:
      if (!modify) return fail(EINVAL, "MODIFY_EV_STATE is a modify operation");
      if (p.state == MRC_CTL_PROFILE_INIT) return fail(EINVAL, "MODIFY_EV_STATE in INIT");
      for (int k = 0; k < op.entry_count; ++k) {
        const mrc_ctl_ev_op_entry& en = op.entries[k];
        const uint32_t want = softmrc::raw(en.state);
        if (want != MRC_CTL_EV_GOOD && want != MRC_CTL_EV_DENIED && want != MRC_CTL_EV_ASSUMED_BAD)
          return fail(EINVAL, "MODIFY_EV_STATE: state must be GOOD, ASSUMED_BAD or DENIED");
        int i = find_ev(p, en.ev);
        if (i < 0) return fail(ENOENT, "MODIFY_EV_STATE: EV not in the profile");
        do {
          const auto idx = static_cast<size_t>(i);
          if (want == MRC_CTL_EV_DENIED) {
            p.denied.insert(idx);
          } else {
            p.denied.erase(idx);
          }
          if (p.engine_id) {
            for (const auto& [key, j] : p.index_of_wev) {
              if (j != idx) continue;
              const engine::EvState es = want == MRC_CTL_EV_DENIED ? engine::EvState::kDenied
                                         : want == MRC_CTL_EV_GOOD ? engine::EvState::kGood
                                                                   : engine::EvState::kAssumedBad;
              // ENOENT: no QP uses the profile yet; the denied set reaches QPs created later.
              engine::Status s = ep.modify_ev_state(*p.engine_id, key.first, es);
              if (!s.ok() && s.code != ENOENT) return fail_status(s);
            }
          }
          if (!(en.flags & MRC_CTL_EV_OP_F_ALL_COPIES)) break;
          i = find_ev(p, en.ev, idx + 1);
        } while (i >= 0);
      }
      return 0;
    case MRC_CTL_EV_OP_QUERY_EV_STATE:
      for (int k = 0; k < op.entry_count; ++k) {
        int i = find_ev(p, op.entries[k].ev);
        if (i < 0) return fail(ENOENT, "QUERY_EV_STATE: EV not in the profile");
        op.entries[k].state = ev_state_now(dev, ep, id, p, static_cast<size_t>(i));
      }
      return 0;
    case MRC_CTL_EV_OP_QUERY_EV_ARRAY: {
      if (p.state == MRC_CTL_PROFILE_INIT) return fail(EINVAL, "QUERY_EV_ARRAY in INIT");
      const int need = static_cast<int>(p.evs.size());
      if (op.entry_count < need) {
        op.entry_count = need;
        return fail(E2BIG, "QUERY_EV_ARRAY: entry array too short");
      }
      for (int k = 0; k < need; ++k) {
        op.entries[k] = mrc_ctl_ev_op_entry{};
        op.entries[k].ev = p.evs[static_cast<size_t>(k)];
        op.entries[k].state = ev_state_now(dev, ep, id, p, static_cast<size_t>(k));
      }
      op.entry_count = need;
      return 0;
    }
  }
  return fail(EINVAL, "EV_OP: unknown operation");
}

int fields_op(softmrc_device* dev, softmrc::EvProfileRec& p, mrc_ctl_ev_profile_attr& a,
              bool modify) {
  auto& op = a.ev_fields_op;
  if (op.field_count < 0 || (op.field_count > 0 && op.fields == nullptr))
    return fail(EINVAL, "EV_FIELDS_OP: fields");
  if (softmrc::raw(op.op) == MRC_CTL_EV_FIELDS_OP_QUERY_FIELDS) {
    const int need = static_cast<int>(p.fields.size());
    if (op.field_count < need) {
      op.field_count = need;
      return fail(E2BIG, "QUERY_FIELDS: field array too short");
    }
    std::copy(p.fields.begin(), p.fields.end(), op.fields);
    op.field_count = need;
    return 0;
  }
  if (softmrc::raw(op.op) != MRC_CTL_EV_FIELDS_OP_MODIFY_FIELDS)
    return fail(EINVAL, "EV_FIELDS_OP: unknown");
  if (!modify) return fail(EINVAL, "MODIFY_FIELDS in a query");
  if (p.state == MRC_CTL_PROFILE_ONLINE) return fail(EINVAL, "MODIFY_FIELDS on an ONLINE profile");
  if (op.field_count == 0) return fail(EINVAL, "MODIFY_FIELDS: no fields");
  if (static_cast<uint32_t>(op.field_count) > kMaxFields) return fail(E2BIG, "MODIFY_FIELDS");
  std::vector<mrc_ctl_ev_field> f(op.fields, op.fields + op.field_count);
  auto fit = dev->fmt_profiles.find(p.fmt_id);
  if (p.have_fmt && fit != dev->fmt_profiles.end() && !fit->second.widths.empty()) {
    if (f.size() > fit->second.widths.size()) return fail(E2BIG, "more fields than the format");
    std::vector<wire::EvField> wf;
    for (const auto& x : f) wf.push_back({x.width, x.init_val, x.min_val, x.max_val, x.mask});
    if (std::string err = wire::validate_ev_profile(fit->second.widths, wf); !err.empty()) {
      if (softmrc::debug_enabled()) std::fprintf(stderr, "softmrc: %s\n", err.c_str());
      return fail(EINVAL, "MODIFY_FIELDS: fields do not fit the EV format");
    }
  }
  for (const auto& x : f)
    if (x.width == 0 || x.width > 32 || (x.width < 32 && (x.mask >> x.width) != 0))
      return fail(EINVAL, "MODIFY_FIELDS: width 1..32 and mask within it");
  p.fields = std::move(f);
  p.have_fields = true;
  return 0;
}

// INIT -> OFFLINE -> ONLINE and back one step at a time; staying where it is is allowed
// (mrc_ctl.h, profile states). The same table for every profile kind.
bool legal_profile_transition(uint32_t from, uint32_t to) {
  return (from == MRC_CTL_PROFILE_INIT && to == MRC_CTL_PROFILE_OFFLINE) ||
         (from == MRC_CTL_PROFILE_OFFLINE &&
          (to == MRC_CTL_PROFILE_ONLINE || to == MRC_CTL_PROFILE_INIT)) ||
         (from == MRC_CTL_PROFILE_ONLINE && to == MRC_CTL_PROFILE_OFFLINE) || from == to;
}

// What every modify_*_profile checks before its own attributes: the device's limit on new
// profiles (a new id starts in INIT) and, when the caller names it, its view of the current
// state. Returns the profile, or nullptr after fail() has set errno. Called under dev->mu.
template <class Rec, class Attr>
Rec* profile_to_modify(std::map<uint64_t, Rec>& profiles, uint64_t id, size_t limit,
                       const char* limit_msg, const Attr& a, bool check_cur_state) {
  if (!profiles.count(id) && profiles.size() >= limit) return fail_null(ENOMEM, limit_msg);
  Rec& p = profiles[id];
  if (check_cur_state && softmrc::raw(a.cur_profile_state) != static_cast<uint32_t>(p.state))
    return fail_null(EINVAL, "cur_profile_state is not the profile's state");
  return &p;
}

}  // namespace

extern "C" {

#define SOFTMRC_EXPORT __attribute__((visibility("default")))

SOFTMRC_EXPORT void mrc_ctl_query_version(uint32_t* current_version,
                                          uint32_t* last_supported_version,
                                          uint32_t* vendor_version,
                                          uint32_t* last_supported_vendor_version) {
  if (current_version) *current_version = MRC_CTL_API_CURRENT_VERSION;
  if (last_supported_version) *last_supported_version = MRC_CTL_API_LAST_SUPPORTED_VERSION;
  if (vendor_version) *vendor_version = MRC_CTL_VENDOR_API_CURRENT_VERSION;
  if (last_supported_vendor_version)
    *last_supported_vendor_version = MRC_CTL_VENDOR_API_LAST_SUPPORTED_VERSION;
}

SOFTMRC_EXPORT int mrc_ctl_query_device_ex(ibv_context* context, mrc_context* mcontext,
                                           mrc_ctl_device_attr* a, int* supported) {
  if (context != nullptr && a != nullptr && softmrc::client::vctx_rid(context, nullptr) != 0)
    return softmrc::remote::ctl_query_device_ex(context, mcontext, a, supported, g_algorithms);
  if (context == nullptr || a == nullptr) return fail(EINVAL, "mrc_ctl_query_device");
  if (mcontext != nullptr && (!softmrc::valid_ctx(mcontext) || mcontext->vctx != context))
    return fail(EINVAL, "mrc_ctl_query_device_ex: MRC context of another device");
  softmrc_device* dev = softmrc::device_of(context);
  if (supported) *supported = dev != nullptr;
  std::memset(a, 0, sizeof *a);
  if (dev == nullptr) return supported ? 0 : fail(ENODEV, "mrc_ctl_query_device: not MRC");
  std::lock_guard<std::mutex> lk(dev->mu);
  a->mrc_ctl_protocol_version = MRC_CTL_PROTOCOL_VERSION_1;
  a->ev.ev_max_fmt_profiles = kMaxFmtProfiles;
  a->ev.ev_max_profiles = kMaxEvProfiles;
  a->ev.ev_max_count = kMaxEvsTotal;
  uint32_t used = 0;
  for (const auto& [id, p] : dev->ev_profiles) used += p.count;
  a->ev.ev_free_count = used >= kMaxEvsTotal ? 0 : kMaxEvsTotal - used;
  a->ev.ev_max_count_profile = kMaxEvsPerProfile;
  a->ev.ev_count_align = 1;
  a->ev.ev_max_width = max_width(fmt_mode_bit(dev->ev_format));
  a->ev.ev_fmt_mode_mask = fmt_mode_bit(dev->ev_format);
  a->ev.ev_mode_mask = MRC_CTL_EV_MODE_AUTO | MRC_CTL_EV_MODE_EXP | MRC_CTL_EV_MODE_GEN;
  a->ev.ev_op_max_entries = 0;
  a->cc.cc_max_profiles = kMaxCcProfiles;
  a->cc.algorithms = g_algorithms;
  for (size_t p = 1; p <= dev->ports.size(); ++p) a->phy_port_mask |= 1u << p;
  a->opt_attr = MRC_CTL_OPT_CAP_EV_EVENT | MRC_CTL_OPT_CAP_EV_EVENT_PRECISE_DROP_CNT |
                MRC_CTL_OPT_CAP_EP_OP_EV_PROBE;
  return 0;
}

SOFTMRC_EXPORT int mrc_ctl_query_device(ibv_context* context, mrc_ctl_device_attr* ctl_attr) {
  return mrc_ctl_query_device_ex(context, nullptr, ctl_attr, nullptr);
}

// ---- ports

SOFTMRC_EXPORT int mrc_ctl_query_port(mrc_context* ctx, uint8_t port_num, mrc_ctl_port_attr* attr,
                                      int attr_mask) {
  if (softmrc::client::is_remote(ctx))
    return softmrc::remote::ctl_port(ctx, port_num, attr, attr_mask, false);
  if (!privileged(ctx, "mrc_ctl_query_port")) return -1;
  if (attr == nullptr || (attr_mask & ~MRC_CTL_PORT_ADMIN_STATE) || port_num == 0 ||
      port_num > ctx->dev->ports.size())
    return fail(EINVAL, "mrc_ctl_query_port");
  std::lock_guard<std::mutex> lk(ctx->dev->mu);
  if (attr_mask & MRC_CTL_PORT_ADMIN_STATE)
    attr->port_admin_state = ctx->dev->ports[port_num - 1].admin_enabled
                                 ? MRC_CTL_PORT_ADMIN_ENABLED
                                 : MRC_CTL_PORT_ADMIN_DISABLED;
  return 0;
}

SOFTMRC_EXPORT int mrc_ctl_modify_port(mrc_context* ctx, uint8_t port_num, mrc_ctl_port_attr* attr,
                                       int attr_mask) {
  if (softmrc::client::is_remote(ctx))
    return softmrc::remote::ctl_port(ctx, port_num, attr, attr_mask, true);
  if (!privileged(ctx, "mrc_ctl_modify_port")) return -1;
  softmrc_device* dev = ctx->dev;
  if (attr == nullptr || (attr_mask & ~MRC_CTL_PORT_ADMIN_STATE) || port_num == 0 ||
      port_num > dev->ports.size())
    return fail(EINVAL, "mrc_ctl_modify_port");
  if (!(attr_mask & MRC_CTL_PORT_ADMIN_STATE)) return 0;
  const uint32_t admin = softmrc::raw(attr->port_admin_state);
  if (admin != MRC_CTL_PORT_ADMIN_ENABLED && admin != MRC_CTL_PORT_ADMIN_DISABLED)
    return fail(EINVAL, "mrc_ctl_modify_port: port_admin_state");
  const bool up = admin == MRC_CTL_PORT_ADMIN_ENABLED;
  engine::Status st;
  dev->with_engine([&](engine::Endpoint& ep) {
    st = ep.set_port_state(port_num, up, now_ns());
    if (st.ok()) {
      std::lock_guard<std::mutex> lk(dev->mu);
      dev->ports[port_num - 1].admin_enabled = up;
    }
  });
  return st.ok() ? 0 : fail_status(st);
}

// ---- EV format profiles

SOFTMRC_EXPORT int mrc_ctl_modify_ev_fmt_profile(mrc_context* ctx, uint64_t id,
                                                 mrc_ctl_ev_fmt_profile_attr* a, int mask) {
  if (softmrc::client::is_remote(ctx))
    return softmrc::remote::ctl_ev_fmt_profile(ctx, id, a, mask, true);
  if (!privileged(ctx, "mrc_ctl_modify_ev_fmt_profile")) return -1;
  constexpr int known = MRC_CTL_EV_FMT_PROFILE_STATE | MRC_CTL_EV_FMT_PROFILE_CUR_STATE |
                        MRC_CTL_EV_FMT_PROFILE_MODE | MRC_CTL_EV_FMT_PROFILE_OP |
                        MRC_CTL_EV_FMT_VENDOR_CFG;
  if (a == nullptr || (mask & ~known) || id == UINT64_MAX)
    return fail(EINVAL, "mrc_ctl_modify_ev_fmt_profile: arguments");
  softmrc_device* dev = ctx->dev;
  int rc = 0;
  dev->with_engine(
      [&](engine::Endpoint&) {
        std::lock_guard<std::mutex> lk(dev->mu);
        softmrc::FmtProfile* pp = profile_to_modify(dev->fmt_profiles, id, kMaxFmtProfiles,
                                                    "EV format profiles: device limit", *a,
                                                    (mask & MRC_CTL_EV_FMT_PROFILE_CUR_STATE) != 0);
        if (pp == nullptr) {
          rc = -1;
          return;
        }
        softmrc::FmtProfile& p = *pp;
        softmrc::FmtProfile next = p;
        const bool online = p.state == MRC_CTL_PROFILE_ONLINE;
        if (mask & MRC_CTL_EV_FMT_PROFILE_MODE) {
          if (online) {
            rc = fail(EINVAL, "MODE of an ONLINE format profile");
            return;
          }
          const uint32_t mode = softmrc::raw(a->ev_fmt_mode);
          if (mode != MRC_CTL_EV_FMT_MODE_STEV && mode != MRC_CTL_EV_FMT_MODE_SRV6 &&
              mode != MRC_CTL_EV_FMT_MODE_UDP) {
            rc = fail(EINVAL, "ev_fmt_mode is not one mode");
            return;
          }
          next.mode = a->ev_fmt_mode;
          next.have_mode = true;
        }
        if (mask & MRC_CTL_EV_FMT_PROFILE_OP) {
          auto& op = a->ev_fmt_op;
          if (softmrc::raw(op.op) == MRC_CTL_EV_FMT_OP_QUERY_FIELDS) {
            if (op.fmt_field_count < static_cast<int>(p.widths.size())) {
              op.fmt_field_count = static_cast<int>(p.widths.size());
              rc = fail(E2BIG, "QUERY_FIELDS: array too short");
              return;
            }
            for (size_t i = 0; i < p.widths.size(); ++i)
              op.fmt_fields[i].width = static_cast<uint8_t>(p.widths[i]);
            op.fmt_field_count = static_cast<int>(p.widths.size());
          } else if (softmrc::raw(op.op) == MRC_CTL_EV_FMT_OP_MODIFY_FIELDS) {
            if (online) {
              rc = fail(EINVAL, "MODIFY_FIELDS of an ONLINE format profile");
              return;
            }
            if (op.fmt_field_count <= 0 || op.fmt_fields == nullptr) {
              rc = fail(EINVAL, "MODIFY_FIELDS: no fields");
              return;
            }
            if (static_cast<uint32_t>(op.fmt_field_count) > kMaxFields) {
              rc = fail(E2BIG, "MODIFY_FIELDS: too many fields");
              return;
            }
            next.widths.clear();
            uint32_t total = 0;
            for (int i = 0; i < op.fmt_field_count; ++i) {
              if (op.fmt_fields[i].width == 0) {
                rc = fail(EINVAL, "MODIFY_FIELDS: zero width");
                return;
              }
              next.widths.push_back(op.fmt_fields[i].width);
              total += op.fmt_fields[i].width;
            }
            if (next.have_mode && total > max_width(next.mode)) {
              rc = fail(E2BIG, "MODIFY_FIELDS: wider than the mode carries");
              return;
            }
          } else {
            rc = fail(EINVAL, "ev_fmt_op.op");
            return;
          }
        }
        if (mask & MRC_CTL_EV_FMT_PROFILE_STATE) {
          const uint32_t to = softmrc::raw(a->profile_state);
          const auto from = p.state;
          if (!legal_profile_transition(from, to)) {
            rc = fail(EINVAL, "illegal EV format profile transition");
            return;
          }
          if (to == MRC_CTL_PROFILE_OFFLINE && from == MRC_CTL_PROFILE_INIT && !next.have_mode) {
            rc = fail(EINVAL, "EV format profile to OFFLINE needs MODE");
            return;
          }
          if (to == MRC_CTL_PROFILE_ONLINE && from != to) {
            if (next.widths.empty()) {
              rc = fail(EINVAL, "EV format profile to ONLINE needs fields");
              return;
            }
            uint32_t total = 0;
            for (uint32_t w : next.widths) total += w;
            if (total > max_width(next.mode)) {
              rc = fail(E2BIG, "EV format fields wider than the mode carries");
              return;
            }
          }
          if (from == MRC_CTL_PROFILE_ONLINE && to == MRC_CTL_PROFILE_OFFLINE)
            for (const auto& [eid, ep] : dev->ev_profiles)
              if (ep.fmt_id == id && ep.state == MRC_CTL_PROFILE_ONLINE) {
                rc = fail(EBUSY, "an ONLINE EV profile uses the format");
                return;
              }
          next.state = static_cast<mrc_ctl_profile_state>(to);
          if (to == MRC_CTL_PROFILE_INIT) next = softmrc::FmtProfile{};
        }
        p = next;
      },
      false);
  return rc;
}

SOFTMRC_EXPORT int mrc_ctl_query_ev_fmt_profile(mrc_context* ctx, uint64_t id,
                                                mrc_ctl_ev_fmt_profile_attr* a, int mask) {
  if (softmrc::client::is_remote(ctx))
    return softmrc::remote::ctl_ev_fmt_profile(ctx, id, a, mask, false);
  if (!privileged(ctx, "mrc_ctl_query_ev_fmt_profile")) return -1;
  if (a == nullptr) return fail(EINVAL, "mrc_ctl_query_ev_fmt_profile");
  std::lock_guard<std::mutex> lk(ctx->dev->mu);
  auto it = ctx->dev->fmt_profiles.find(id);
  if (it == ctx->dev->fmt_profiles.end() || id == UINT64_MAX)
    return fail(EINVAL, "no such EV format profile");
  const softmrc::FmtProfile& p = it->second;
  if (mask & (MRC_CTL_EV_FMT_PROFILE_STATE | MRC_CTL_EV_FMT_PROFILE_CUR_STATE))
    a->profile_state = a->cur_profile_state = p.state;
  if (mask & MRC_CTL_EV_FMT_PROFILE_MODE) a->ev_fmt_mode = p.mode;
  if (mask & MRC_CTL_EV_FMT_PROFILE_OP) {
    auto& op = a->ev_fmt_op;
    if (softmrc::raw(op.op) != MRC_CTL_EV_FMT_OP_QUERY_FIELDS)
      return fail(EINVAL, "MODIFY_FIELDS in a query");
    if (op.fmt_field_count < static_cast<int>(p.widths.size()) || op.fmt_fields == nullptr) {
      op.fmt_field_count = static_cast<int>(p.widths.size());
      return fail(E2BIG, "QUERY_FIELDS: array too short");
    }
    for (size_t i = 0; i < p.widths.size(); ++i)
      op.fmt_fields[i].width = static_cast<uint8_t>(p.widths[i]);
    op.fmt_field_count = static_cast<int>(p.widths.size());
  }
  return 0;
}

// ---- EV profiles

SOFTMRC_EXPORT int mrc_ctl_modify_ev_profile(mrc_context* ctx, uint64_t id,
                                             mrc_ctl_ev_profile_attr* a, int mask) {
  if (softmrc::client::is_remote(ctx))
    return softmrc::remote::ctl_ev_profile(ctx, id, a, mask, true);
  if (!privileged(ctx, "mrc_ctl_modify_ev_profile")) return -1;
  constexpr int known = MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_CUR_STATE |
                        MRC_CTL_EV_PROFILE_MODE | MRC_CTL_EV_PROFILE_FMT_ID |
                        MRC_CTL_EV_PROFILE_COUNT | MRC_CTL_EV_PROFILE_MIN_ACTIVE |
                        MRC_CTL_EV_PROFILE_EVENT_MASK | MRC_CTL_EV_PROFILE_EV_OP |
                        MRC_CTL_EV_PROFILE_EV_FIELDS_OP | MRC_CTL_EV_PROFILE_VENDOR_CFG;
  if (a == nullptr || (mask & ~known)) return fail(EINVAL, "mrc_ctl_modify_ev_profile");
  if ((mask & MRC_CTL_EV_PROFILE_EV_OP) && (mask & MRC_CTL_EV_PROFILE_EV_FIELDS_OP))
    return fail(EINVAL, "EV_OP and EV_FIELDS_OP are mutually exclusive");
  softmrc_device* dev = ctx->dev;
  int rc = 0;
  dev->with_engine(
      [&](engine::Endpoint& ep) {
        std::lock_guard<std::mutex> lk(dev->mu);
        softmrc::EvProfileRec* pp =
            profile_to_modify(dev->ev_profiles, id, kMaxEvProfiles, "EV profiles: device limit", *a,
                              (mask & MRC_CTL_EV_PROFILE_CUR_STATE) != 0);
        if (pp == nullptr) {
          rc = -1;
          return;
        }
        softmrc::EvProfileRec& p = *pp;
        softmrc::EvProfileRec next = p;
        const bool online = p.state == MRC_CTL_PROFILE_ONLINE;
        constexpr int config = MRC_CTL_EV_PROFILE_MODE | MRC_CTL_EV_PROFILE_FMT_ID |
                               MRC_CTL_EV_PROFILE_COUNT | MRC_CTL_EV_PROFILE_MIN_ACTIVE |
                               MRC_CTL_EV_PROFILE_EVENT_MASK;
        if (online && (mask & config)) {
          rc = fail(EINVAL, "configuration of an ONLINE EV profile (no MODIFY_ONLINE capability)");
          return;
        }
        if (mask & MRC_CTL_EV_PROFILE_MODE) {
          const uint32_t mode = softmrc::raw(a->ev_mode);
          if (mode != MRC_CTL_EV_MODE_AUTO && mode != MRC_CTL_EV_MODE_EXP &&
              mode != MRC_CTL_EV_MODE_GEN) {
            rc = fail(EINVAL, "ev_mode is not one mode");
            return;
          }
          next.mode = a->ev_mode;
          next.have_mode = true;
        }
        if (mask & MRC_CTL_EV_PROFILE_FMT_ID) {
          auto fit = dev->fmt_profiles.find(a->ev_fmt_profile_id);
          if (fit == dev->fmt_profiles.end() || fit->second.state == MRC_CTL_PROFILE_INIT ||
              a->ev_fmt_profile_id == UINT64_MAX) {
            rc = fail(EINVAL, "ev_fmt_profile_id names no configured EV format profile");
            return;
          }
          next.fmt_id = a->ev_fmt_profile_id;
          next.have_fmt = true;
        }
        if (mask & MRC_CTL_EV_PROFILE_COUNT) {
          if (a->ev_count == 0 || a->ev_count > kMaxEvsPerProfile) {
            rc = fail(a->ev_count == 0 ? EINVAL : E2BIG, "ev_count");
            return;
          }
          next.count = a->ev_count;
          next.have_count = true;
          next.evs.resize(next.count, mrc_ctl_ev{});  // new explicit entries are unpopulated
        }
        if (mask & MRC_CTL_EV_PROFILE_MIN_ACTIVE) {
          next.min_active = a->ev_min_active;
          next.have_min_active = true;
        }
        if (mask & MRC_CTL_EV_PROFILE_EVENT_MASK) {
          if (a->ev_event_mask & ~(MRC_CTL_EV_GOOD | MRC_CTL_EV_ASSUMED_BAD)) {
            rc = fail(EINVAL, "ev_event_mask: only GOOD and ASSUMED_BAD");
            return;
          }
          next.event_mask = a->ev_event_mask;
          next.have_event_mask = true;
        }
        if (mask & MRC_CTL_EV_PROFILE_EV_FIELDS_OP) {
          if (next.state == MRC_CTL_PROFILE_INIT && !(mask & MRC_CTL_EV_PROFILE_STATE) &&
              softmrc::raw(a->ev_fields_op.op) == MRC_CTL_EV_FIELDS_OP_QUERY_FIELDS) {
            rc = fail(EINVAL, "QUERY_FIELDS in INIT");
            return;
          }
          if ((rc = fields_op(dev, next, *a, true)) != 0) return;
        }
        if (mask & MRC_CTL_EV_PROFILE_EV_OP) {
          if (next.state == MRC_CTL_PROFILE_INIT) {
            rc = fail(EINVAL, "EV operation on an INIT profile");
            return;
          }
          if ((rc = ev_op(dev, ep, id, next, *a, true)) != 0) {
            // Entries before the failing one took effect (mrc_ctl.h: per-entry semantics).
            p.evs = next.evs;
            p.denied = next.denied;
            return;
          }
        }
        if (mask & MRC_CTL_EV_PROFILE_STATE) {
          const uint32_t to = softmrc::raw(a->profile_state);
          const auto from = p.state;
          if (!legal_profile_transition(from, to)) {
            rc = fail(EINVAL, "illegal EV profile transition");
            return;
          }
          if (from == MRC_CTL_PROFILE_INIT && to == MRC_CTL_PROFILE_OFFLINE) {
            if (!next.have_mode || !next.have_count ||
                (next.mode != MRC_CTL_EV_MODE_AUTO && !next.have_fmt) ||
                (next.mode == MRC_CTL_EV_MODE_GEN && !next.have_fields)) {
              rc = fail(EINVAL, "EV profile to OFFLINE needs MODE, FMT_ID, COUNT (and fields)");
              return;
            }
            if (next.mode == MRC_CTL_EV_MODE_EXP) next.evs.assign(next.count, mrc_ctl_ev{});
          }
          if (from == MRC_CTL_PROFILE_OFFLINE && to == MRC_CTL_PROFILE_ONLINE) {
            next.state = static_cast<mrc_ctl_profile_state>(to);
            if ((rc = go_online(dev, ep, id, next)) != 0) return;
          }
          if (from == MRC_CTL_PROFILE_ONLINE && to == MRC_CTL_PROFILE_OFFLINE) {
            if (dev->ev_profile_users[id] > 0) {
              rc = fail(EBUSY, "QPs use the EV profile");
              return;
            }
            next.engine_id.reset();
          }
          next.state = static_cast<mrc_ctl_profile_state>(to);
          if (to == MRC_CTL_PROFILE_INIT) next = softmrc::EvProfileRec{};
        }
        p = std::move(next);
      },
      false);
  return rc;
}

SOFTMRC_EXPORT int mrc_ctl_query_ev_profile(mrc_context* ctx, uint64_t id,
                                            mrc_ctl_ev_profile_attr* a, int mask) {
  if (softmrc::client::is_remote(ctx))
    return softmrc::remote::ctl_ev_profile(ctx, id, a, mask, false);
  if (!privileged(ctx, "mrc_ctl_query_ev_profile")) return -1;
  if (a == nullptr) return fail(EINVAL, "mrc_ctl_query_ev_profile");
  if ((mask & MRC_CTL_EV_PROFILE_EV_OP) && (mask & MRC_CTL_EV_PROFILE_EV_FIELDS_OP))
    return fail(EINVAL, "EV_OP and EV_FIELDS_OP are mutually exclusive");
  softmrc_device* dev = ctx->dev;
  int rc = 0;
  dev->with_engine(
      [&](engine::Endpoint& ep) {
        std::lock_guard<std::mutex> lk(dev->mu);
        auto it = dev->ev_profiles.find(id);
        if (it == dev->ev_profiles.end()) {
          rc = fail(EINVAL, "no such EV profile");
          return;
        }
        softmrc::EvProfileRec& p = it->second;
        if (mask & (MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_CUR_STATE))
          a->profile_state = a->cur_profile_state = p.state;
        if (mask & MRC_CTL_EV_PROFILE_MODE) a->ev_mode = p.mode;
        if (mask & MRC_CTL_EV_PROFILE_FMT_ID) a->ev_fmt_profile_id = p.fmt_id;
        if (mask & MRC_CTL_EV_PROFILE_COUNT) a->ev_count = p.count;
        if (mask & MRC_CTL_EV_PROFILE_MIN_ACTIVE) a->ev_min_active = p.min_active;
        if (mask & MRC_CTL_EV_PROFILE_EVENT_MASK) a->ev_event_mask = p.event_mask;
        if (mask & MRC_CTL_EV_PROFILE_EV_FIELDS_OP) rc = fields_op(dev, p, *a, false);
        if (!rc && (mask & MRC_CTL_EV_PROFILE_EV_OP)) rc = ev_op(dev, ep, id, p, *a, false);
      },
      false);
  return rc;
}

// ---- CC profiles

SOFTMRC_EXPORT int mrc_ctl_modify_cc_profile(mrc_context* ctx, uint64_t id,
                                             mrc_ctl_cc_profile_attr* a, int mask) {
  if (softmrc::client::is_remote(ctx))
    return softmrc::remote::ctl_cc_profile(ctx, id, a, mask, true, g_algorithms);
  if (!privileged(ctx, "mrc_ctl_modify_cc_profile")) return -1;
  constexpr int known = MRC_CTL_CC_PROFILE_STATE | MRC_CTL_CC_PROFILE_CUR_STATE |
                        MRC_CTL_CC_PROFILE_ALGORITHM | MRC_CTL_CC_PROFILE_CONFIG |
                        MRC_CTL_CC_PROFILE_VENDOR_CFG;
  if (a == nullptr || (mask & ~known)) return fail(EINVAL, "mrc_ctl_modify_cc_profile");
  softmrc_device* dev = ctx->dev;
  int rc = 0;
  dev->with_engine(
      [&](engine::Endpoint& ep) {
        std::lock_guard<std::mutex> lk(dev->mu);
        softmrc::CcProfileRec* pp =
            profile_to_modify(dev->cc_profiles, id, kMaxCcProfiles, "CC profiles: device limit", *a,
                              (mask & MRC_CTL_CC_PROFILE_CUR_STATE) != 0);
        if (pp == nullptr) {
          rc = -1;
          return;
        }
        softmrc::CcProfileRec& p = *pp;
        softmrc::CcProfileRec next = p;
        const bool online = p.state == MRC_CTL_PROFILE_ONLINE;
        if (online && (mask & (MRC_CTL_CC_PROFILE_ALGORITHM | MRC_CTL_CC_PROFILE_CONFIG))) {
          rc = fail(EINVAL, "configuration of an ONLINE CC profile (no MODIFY_ONLINE capability)");
          return;
        }
        if (mask & MRC_CTL_CC_PROFILE_ALGORITHM) {
          if (a->algorithm != nullptr && std::strcmp(a->algorithm, g_algorithms[0]) != 0) {
            rc = fail(EINVAL, "algorithm is not one of device_attr.cc.algorithms");
            return;
          }
          next.algorithm = a->algorithm ? a->algorithm : "";
          next.have_algorithm = true;
          next.have_config = false;
        }
        if (mask & MRC_CTL_CC_PROFILE_CONFIG) {
          if (!next.have_algorithm) {
            rc = fail(EINVAL, "CONFIG before ALGORITHM");
            return;
          }
          if (!next.algorithm.empty()) {
            if (a->cc_config == nullptr) {
              rc = fail(EINVAL, "uet-1.0-nscc needs a struct mrc_ctl_cc_nscc_cfg");
              return;
            }
            const auto* c = static_cast<const mrc_ctl_cc_nscc_cfg*>(a->cc_config);
            if (c->max_cwnd == 0 || c->base_rtt == 0 || !(c->gamma >= 0) ||
                !(c->max_md_jump >= 0 && c->max_md_jump <= 1)) {
              rc = fail(EINVAL,
                        "nscc config: max_cwnd, base_rtt > 0, gamma >= 0, max_md_jump in [0,1]");
              return;
            }
            next.cfg_copy = *c;
            engine::NsccConfig& n = next.nscc;
            n.disable_qa = c->disable_qa;
            n.adjust_bytes_threshold = c->adjust_bytes_threshold;
            n.adjust_period_threshold = c->adjust_period_threshold;
            n.base_rtt = c->base_rtt;
            n.eta = c->eta;
            n.fi = c->fi;
            n.fi_scale = c->fi_scale;
            n.gamma = c->gamma;
            n.max_md_jump = c->max_md_jump;
            n.max_cwnd = c->max_cwnd;
            n.qa_gate = c->qa_gate;
            n.qa_threshold = c->qa_threshold;
            n.target_delay = c->target_delay;
          }
          next.have_config = true;
        }
        if (mask & MRC_CTL_CC_PROFILE_STATE) {
          const uint32_t to = softmrc::raw(a->profile_state);
          const auto from = p.state;
          if (!legal_profile_transition(from, to)) {
            rc = fail(EINVAL, "illegal CC profile transition");
            return;
          }
          if (from == MRC_CTL_PROFILE_INIT && to == MRC_CTL_PROFILE_OFFLINE &&
              !next.have_algorithm) {
            rc = fail(EINVAL, "CC profile to OFFLINE needs ALGORITHM");
            return;
          }
          if (from == MRC_CTL_PROFILE_OFFLINE && to == MRC_CTL_PROFILE_ONLINE) {
            if (!next.have_config && !next.algorithm.empty()) {
              rc = fail(EINVAL, "CC profile to ONLINE needs CONFIG");
              return;
            }
            engine::CcProfile cp;
            cp.algorithm = next.algorithm.empty() ? std::string(engine::kCcNone) : next.algorithm;
            cp.nscc = next.nscc;
            const uint64_t eid = dev->next_engine_profile_id++;
            if (engine::Status s = ep.add_cc_profile(eid, cp); !s.ok()) {
              rc = fail_status(s);
              return;
            }
            next.engine_id = eid;
          }
          if (from == MRC_CTL_PROFILE_ONLINE && to == MRC_CTL_PROFILE_OFFLINE) {
            if (dev->cc_profile_users[id] > 0) {
              rc = fail(EBUSY, "QPs use the CC profile");
              return;
            }
            next.engine_id.reset();
          }
          next.state = static_cast<mrc_ctl_profile_state>(to);
          if (to == MRC_CTL_PROFILE_INIT) next = softmrc::CcProfileRec{};
        }
        p = next;
      },
      false);
  return rc;
}

SOFTMRC_EXPORT int mrc_ctl_query_cc_profile(mrc_context* ctx, uint64_t id,
                                            mrc_ctl_cc_profile_attr* a, int mask) {
  if (softmrc::client::is_remote(ctx))
    return softmrc::remote::ctl_cc_profile(ctx, id, a, mask, false, g_algorithms);
  if (!privileged(ctx, "mrc_ctl_query_cc_profile")) return -1;
  if (a == nullptr) return fail(EINVAL, "mrc_ctl_query_cc_profile");
  std::lock_guard<std::mutex> lk(ctx->dev->mu);
  auto it = ctx->dev->cc_profiles.find(id);
  if (it == ctx->dev->cc_profiles.end()) return fail(EINVAL, "no such CC profile");
  const softmrc::CcProfileRec& p = it->second;
  if (mask & (MRC_CTL_CC_PROFILE_STATE | MRC_CTL_CC_PROFILE_CUR_STATE))
    a->profile_state = a->cur_profile_state = p.state;
  if (mask & MRC_CTL_CC_PROFILE_ALGORITHM)
    a->algorithm = p.algorithm.empty() ? nullptr : g_algorithms[0];
  if (mask & MRC_CTL_CC_PROFILE_CONFIG)
    a->cc_config = p.have_config && !p.algorithm.empty() ? &it->second.cfg_copy : nullptr;
  return 0;
}

// ---- EV events

SOFTMRC_EXPORT mrc_cq* mrc_ctl_create_ev_event_cq(mrc_context* ctx, int cqe, void* cq_context,
                                                  mrc_comp_channel* channel, int comp_vector) {
  if (softmrc::client::is_remote(ctx))
    return softmrc::remote::create_cq(ctx, cqe, cq_context, channel, comp_vector, true);
  if (!privileged(ctx, "mrc_ctl_create_ev_event_cq")) return nullptr;
  return softmrc::create_cq(ctx, cqe, cq_context, channel, comp_vector, true);
}

SOFTMRC_EXPORT int mrc_ctl_poll_ev_event(mrc_cq* cq, int num_entries, mrc_ctl_ev_event* out) {
  if (softmrc::client::is_remote(cq))
    return softmrc::remote::ctl_poll_ev_event(cq, num_entries, out);
  if (!softmrc::valid_cq(cq) || !cq->ev_event_cq || num_entries < 0 ||
      (num_entries > 0 && out == nullptr))
    return -EINVAL;
  // Controllers built for API 1.0.0 have events without `state`: a shorter stride.
  const bool with_state =
      cq->ctx->api_version == 0 || cq->ctx->api_version >= MRC_CTL_API_VER(1, 0, 1);
  const size_t stride =
      with_state ? sizeof(mrc_ctl_ev_event) : (offsetof(mrc_ctl_ev_event, state) + 7) / 8 * 8;
  auto* bytes = reinterpret_cast<unsigned char*>(out);
  std::lock_guard<std::mutex> lk(cq->mu);
  int n = 0;
  while (n < num_entries && !cq->ev_events.empty()) {
    const mrc_ctl_ev_event& e = cq->ev_events.front();
    std::memcpy(bytes + static_cast<size_t>(n) * stride, &e,
                with_state ? sizeof e : offsetof(mrc_ctl_ev_event, state));
    cq->ev_events.pop_front();
    ++n;
  }
  return n;
}

// ---- endpoint operations

SOFTMRC_EXPORT int mrc_ctl_ep_batch_send_wait(mrc_context* ctx, uint8_t req_tc,
                                              mrc_ctl_ep_op_type op_type, mrc_ctl_ep_req* req,
                                              int num_req, uint32_t rsp_timeout,
                                              mrc_ctl_ep_rsp* rsp, int* num_rsp) {
  if (softmrc::client::is_remote(ctx))
    return softmrc::remote::ctl_ep_batch_send_wait(ctx, req_tc, op_type, req, num_req, rsp_timeout,
                                                   rsp, num_rsp);
  if (!privileged(ctx, "mrc_ctl_ep_batch_send_wait")) return -1;
  if (req == nullptr || rsp == nullptr || num_rsp == nullptr || num_req <= 0 || req_tc > 63 ||
      (op_type != MRC_CTL_EP_OP_EV_PROBE && op_type != MRC_CTL_EP_OP_PORT_STATUS_UPDATE))
    return fail(EINVAL, "mrc_ctl_ep_batch_send_wait: arguments");
  *num_rsp = 0;
  softmrc_device* dev = ctx->dev;
  const uint32_t my_mode = fmt_mode_bit(dev->ev_format);
  std::vector<engine::EpRequest> reqs;
  std::set<uint16_t> ids;
  for (int i = 0; i < num_req; ++i) {
    const mrc_ctl_ep_req& r = req[i];
    if (softmrc::raw(r.ev_fmt_mode) != my_mode)
      return fail(EINVAL, "ev_fmt_mode is not the device's EV format");
    if (std::memcmp(r.sgid.raw, dev->node_gid.data(), 16) != 0)
      return fail(EINVAL, "sgid is not the device's GID");
    if (r.req_ev.port == 0 || r.req_ev.port > dev->ports.size())
      return fail(EINVAL, "req_ev.port is not a port of the device");
    if (!ids.insert(r.req_id).second) return fail(EINVAL, "req_id repeated in the batch");
    engine::EpRequest e;
    e.req_id = r.req_id;
    std::memcpy(e.dgid.data(), r.dgid.raw, 16);
    e.op = op_type == MRC_CTL_EP_OP_EV_PROBE ? wire::EndpointOp::kEvProbe
                                             : wire::EndpointOp::kPortStatusUpdate;
    // The EV travels as its bytes say, in network order (STEV: 4 bytes, UDP: 2, SRv6: the DA
    // and segment).
    const uint8_t* v = r.req_ev.val;
    e.wev = dev->ev_format == wire::EvFormat::kUdp
                ? (uint32_t{v[0]} << 8) | v[1]
                : (uint32_t{v[0]} << 24) | (uint32_t{v[1]} << 16) | (uint32_t{v[2]} << 8) | v[3];
    std::memcpy(e.srv6_ev.data(), v, e.srv6_ev.size());
    e.port = r.req_ev.port;
    e.port_status_mask = r.op.port_status_update.port_status;
    e.dscp = req_tc;
    e.timeout_ns = rsp_timeout;
    reqs.push_back(e);
  }
  engine::Status st;
  dev->with_engine([&](engine::Endpoint& ep) {
    {
      std::lock_guard<std::mutex> lk(dev->mu);
      // Responses of an earlier batch that timed out must not answer this one.
      auto& q = dev->ep_responses;
      q.erase(std::remove_if(q.begin(), q.end(),
                             [&](const engine::EpResponse& x) { return ids.count(x.req_id) != 0; }),
              q.end());
    }
    const uint64_t now = now_ns();
    for (const auto& e : reqs) {
      st = ep.ep_post_request(e, now);
      if (!st.ok()) return;
    }
  });
  if (!st.ok()) return fail_status(st);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::nanoseconds(rsp_timeout);
  std::unique_lock<std::mutex> lk(dev->mu);
  for (;;) {
    auto& q = dev->ep_responses;
    for (auto it = q.begin(); it != q.end();) {
      if (!ids.count(it->req_id)) {
        ++it;
        continue;
      }
      if (!it->timed_out && *num_rsp < num_req) {  // arrival order
        mrc_ctl_ep_rsp& out = rsp[(*num_rsp)++];
        out = mrc_ctl_ep_rsp{};
        out.req_id = it->req_id;
        out.port = it->port;
        out.rtt = static_cast<unsigned>(std::min<uint64_t>(it->rtt_ns, UINT32_MAX));
        out.adj_svc_time = it->adj_svc_time ? 1 : 0;
      }
      ids.erase(it->req_id);  // answered, or the engine gave up on it
      it = q.erase(it);
    }
    if (ids.empty() || std::chrono::steady_clock::now() >= deadline) break;
    dev->ep_cv.wait_until(lk, deadline);
  }
  if (*num_rsp < num_req) return fail(ETIMEDOUT, "mrc_ctl_ep_batch_send_wait: responses missing");
  return 0;
}

}  // extern "C"
