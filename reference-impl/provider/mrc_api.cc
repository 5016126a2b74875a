// mrc.h on the SoftMRC device: versions, device query, contexts, completion channels, CQs,
// QP hints, QPs and their state machine, posting, asynchronous events.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "reference-impl/provider/client.h"
#include "reference-impl/provider/softmrc.h"

namespace engine = mrc::engine;
namespace wire = mrc::wire;

using softmrc::fail;
using softmrc::fail_null;
using softmrc::fail_status;

namespace {

constexpr uint32_t kLatestVersion = static_cast<uint32_t>(MRC_API_VER_LATEST);

// Device defaults for the MRC attributes a transition requires but the application left out
// (the OCP benchmark gives none): README.md lists them.
constexpr uint16_t kDefaultMaxWimm = 64;
// 1024 PSNs, as `mrct endpoint --mpr` defaults to: the engine sizes a QP's PSN tables by the
// window (README.md, "Memory per QP"), and 64 units (8192 PSNs) made every QP 1.1 MiB.
constexpr uint8_t kDefaultMpr = 8;
constexpr uint8_t kDefaultTimeout = 18;  // 268 ms: survives the scheduling of a shared host
constexpr uint8_t kDefaultLinearRetry = 7;
constexpr uint8_t kDefaultExpRetry = 7;

// Verbs attributes mrc.h lists as not supported. They are accepted and ignored (see README.md:
// the companion benchmark sets IBV_QP_PORT, IBV_QP_TIMEOUT, IBV_QP_RETRY_CNT and
// IBV_QP_RNR_RETRY, with verbs-invalid values for the last two).
constexpr int kIgnoredVerbs = IBV_QP_PORT | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                              IBV_QP_MIN_RNR_TIMER | IBV_QP_MAX_QP_RD_ATOMIC |
                              IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE;
// Verbs attributes an MRC QP takes (values are the engine's QpAttrMask, equal to verbs').
constexpr int kTakenVerbs = IBV_QP_STATE | IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS |
                            IBV_QP_PKEY_INDEX | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_RQ_PSN |
                            IBV_QP_SQ_PSN | IBV_QP_DEST_QPN;

engine::QpState to_engine(uint32_t s, bool& ok) {
  ok = true;
  switch (s) {
    case IBV_QPS_RESET:
      return engine::QpState::kReset;
    case IBV_QPS_INIT:
      return engine::QpState::kInit;
    case IBV_QPS_RTR:
      return engine::QpState::kRtr;
    case IBV_QPS_RTS:
      return engine::QpState::kRts;
    case IBV_QPS_ERR:
      return engine::QpState::kErr;
    default:
      ok = false;
      return engine::QpState::kReset;
  }
}

ibv_qp_state to_verbs(engine::QpState s) {
  switch (s) {
    case engine::QpState::kReset:
      return IBV_QPS_RESET;
    case engine::QpState::kInit:
      return IBV_QPS_INIT;
    case engine::QpState::kRtr:
      return IBV_QPS_RTR;
    case engine::QpState::kRts:
      return IBV_QPS_RTS;
    case engine::QpState::kErr:
      return IBV_QPS_ERR;
  }
  return IBV_QPS_ERR;
}

uint32_t mtu_bytes(uint32_t m) {
  switch (m) {
    case IBV_MTU_256:
      return 256;
    case IBV_MTU_512:
      return 512;
    case IBV_MTU_1024:
      return 1024;
    case IBV_MTU_2048:
      return 2048;
    case IBV_MTU_4096:
      return 4096;
  }
  return 0;
}

ibv_mtu mtu_enum(uint32_t bytes) {
  switch (bytes) {
    case 256:
      return IBV_MTU_256;
    case 512:
      return IBV_MTU_512;
    case 1024:
      return IBV_MTU_1024;
    case 2048:
      return IBV_MTU_2048;
    default:
      return IBV_MTU_4096;
  }
}

bool version_supported(uint32_t v, uint32_t current) {
  return v == 0 || v == kLatestVersion || v <= current;
}

// The port's next hop towards the peer (the runtime solicits it when the neighbour table has
// no entry yet): a router, or the peer itself on a direct link.
int resolve_port_next_hop(softmrc_device* dev, size_t port_index, const wire::Ipv6Addr& dgid) {
  if (!dev->rt) return 0;
  const std::string& iface = dev->ports[port_index].iface;
  wire::MacAddr mac{};
  std::vector<wire::Ipv6Addr> dsts{dgid};
  engine::Status st = mrc::runtime::resolve_next_hop(iface, dsts, 3'000'000'000ull, mac);
  if (!st.ok()) return fail_status(engine::Status::Error(ENETUNREACH, st.message));
  auto cur = dev->rt->next_hop(static_cast<uint8_t>(port_index + 1));
  if (cur && *cur != mac)
    return fail(ENETUNREACH,
                "mrc_modify_qp: the peer is behind another next hop than this port's (SoftMRC "
                "keeps one next hop per port, as a NIC behind its switch)");
  dev->rt->set_next_hop(static_cast<uint8_t>(port_index + 1), mac);
  return 0;
}

// The engine's id of a controller profile a QP names: only an ONLINE profile has one.
template <class Rec>
std::optional<uint64_t> online_engine_id(const std::map<uint64_t, Rec>& profiles, uint64_t id) {
  auto it = profiles.find(id);
  if (it == profiles.end() || it->second.state != MRC_CTL_PROFILE_ONLINE) return std::nullopt;
  return it->second.engine_id;
}

}  // namespace

namespace softmrc {

bool valid_ctx(mrc_context* ctx) {
  if (ctx == nullptr || ctx->dev == nullptr) return false;
  std::lock_guard<std::mutex> lk(ctx->dev->mu);
  return ctx->dev->contexts.count(ctx) != 0;
}

bool valid_cq(mrc_cq* cq) {
  if (cq == nullptr || !valid_ctx(cq->ctx)) return false;
  std::lock_guard<std::mutex> lk(cq->ctx->dev->mu);
  return cq->ctx->cqs.count(cq) != 0;
}

}  // namespace softmrc

using softmrc::valid_cq;
using softmrc::valid_ctx;

extern "C" {

#define SOFTMRC_EXPORT __attribute__((visibility("default")))

SOFTMRC_EXPORT void mrc_query_version(uint32_t* current_version, uint32_t* last_supported_version,
                                      uint32_t* vendor_version,
                                      uint32_t* last_supported_vendor_version) {
  if (current_version) *current_version = MRC_API_CURRENT_VERSION;
  if (last_supported_version) *last_supported_version = MRC_API_LAST_SUPPORTED_VERSION;
  if (vendor_version) *vendor_version = MRC_VENDOR_API_CURRENT_VERSION;
  if (last_supported_vendor_version)
    *last_supported_vendor_version = MRC_VENDOR_API_LAST_SUPPORTED_VERSION;
}

SOFTMRC_EXPORT int mrc_query_device_ex(ibv_context* context, mrc_context* mcontext,
                                       mrc_device_attr* attr, int* supported) {
  if (softmrc::client::vctx_rid(context, nullptr) != 0 && attr != nullptr && supported != nullptr)
    return softmrc::remote::query_device_ex(context, mcontext, attr, supported);
  if (context == nullptr || attr == nullptr || supported == nullptr)
    return fail(EINVAL, "mrc_query_device: NULL argument");
  if (mcontext != nullptr && (!valid_ctx(mcontext) || mcontext->vctx != context))
    return fail(EINVAL, "mrc_query_device_ex: MRC context of another device");
  std::memset(attr, 0, sizeof *attr);
  softmrc_device* dev = softmrc::device_of(context);
  *supported = dev != nullptr;
  if (dev == nullptr) return 0;  // a verbs device, but not an MRC one
  const auto& caps = softmrc::device_caps();
  attr->mrc_protocol_version = MRC_PROTOCOL_VERSION_1;
  attr->wimm_attr.max_wimm = caps.max_wimm;
  attr->wimm_attr.max_wimm_dest = caps.max_wimm_dest;
  attr->mpr_attr.max_mpr = caps.max_mpr;
  attr->mpr_attr.mpr_resolution = 1;
  attr->qp_attr.max_qp_hint = 1024;
  attr->cap = (caps.trim_nack ? MRC_DEVICE_CAP_TRIM_NACK : 0) |
              (caps.dynamic_mpr ? MRC_DEVICE_CAP_DYNAMIC_MPR : 0) |
              (caps.svc_time ? MRC_DEVICE_CAP_SVC_TIME : 0);
  return 0;
}

SOFTMRC_EXPORT int mrc_query_device(ibv_context* context, mrc_device_attr* attr, int* supported) {
  return mrc_query_device_ex(context, nullptr, attr, supported);
}

SOFTMRC_EXPORT mrc_context* mrc_create_context(ibv_context* vcontext,
                                               mrc_context_attr* context_attr) {
  if (vcontext != nullptr && softmrc::client::vctx_rid(vcontext, nullptr) != 0)
    return softmrc::remote::create_context(vcontext, context_attr);
  softmrc_device* dev = vcontext ? softmrc::device_of(vcontext) : nullptr;
  if (dev == nullptr) return fail_null(ENODEV, "mrc_create_context: not a SoftMRC device");
  uint32_t api = MRC_API_CURRENT_VERSION, vendor = MRC_VENDOR_API_CURRENT_VERSION;
  if (context_attr != nullptr) {
    if (!version_supported(context_attr->mrc_api_version_used, MRC_API_CURRENT_VERSION) ||
        !version_supported(context_attr->mrc_vendor_api_version_used,
                           MRC_VENDOR_API_CURRENT_VERSION))
      return fail_null(ENOTSUP, "mrc_create_context: API version newer than the library's");
    if (context_attr->mrc_api_version_used != 0 &&
        context_attr->mrc_api_version_used != kLatestVersion)
      api = context_attr->mrc_api_version_used;
    if (context_attr->mrc_vendor_api_version_used != 0 &&
        context_attr->mrc_vendor_api_version_used != kLatestVersion)
      vendor = context_attr->mrc_vendor_api_version_used;
  }
  auto* ctx = new mrc_context;
  ctx->dev = dev;
  ctx->vctx = vcontext;
  ctx->api_version = api;
  ctx->vendor_api_version = vendor;
  ctx->async_fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
  if (ctx->async_fd < 0) {
    delete ctx;
    return fail_null(errno, "eventfd");
  }
  dev->with_engine(
      [&](engine::Endpoint&) {
        std::lock_guard<std::mutex> lk(dev->mu);
        dev->contexts.insert(ctx);
      },
      false);
  return ctx;
}

SOFTMRC_EXPORT int mrc_destroy_context(mrc_context* ctx) {
  if (softmrc::client::is_remote(ctx)) return softmrc::remote::destroy_context(ctx);
  if (!valid_ctx(ctx)) return fail(EINVAL, "mrc_destroy_context: not a context");
  softmrc_device* dev = ctx->dev;
  int rc = 0;
  dev->with_engine(
      [&](engine::Endpoint&) {
        std::lock_guard<std::mutex> lk(dev->mu);
        if (!ctx->qps.empty() || !ctx->cqs.empty() || !ctx->hints.empty() ||
            !ctx->channels.empty()) {
          rc = EBUSY;
          return;
        }
        dev->contexts.erase(ctx);
      },
      false);
  if (rc) return fail(rc, "mrc_destroy_context: objects of the context remain");
  close(ctx->async_fd);
  delete ctx;
  return 0;
}

// ---- completion channels

SOFTMRC_EXPORT int mrc_create_comp_channel(mrc_context* ctx, mrc_comp_channel** channel) {
  if (softmrc::client::is_remote(ctx) && channel != nullptr)
    return softmrc::remote::create_comp_channel(ctx, channel);
  if (!valid_ctx(ctx) || channel == nullptr) return fail(EINVAL, "mrc_create_comp_channel");
  auto* ch = new mrc_comp_channel;
  ch->ctx = ctx;
  ch->fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
  if (ch->fd < 0) {
    const int e = errno;
    delete ch;
    return fail(e, "eventfd");
  }
  {
    std::lock_guard<std::mutex> lk(ctx->dev->mu);
    ctx->channels.insert(ch);
  }
  *channel = ch;
  return 0;
}

SOFTMRC_EXPORT int mrc_get_comp_channel_fd(mrc_comp_channel* channel, int* fd) {
  if (channel == nullptr || fd == nullptr) return fail(EINVAL, "mrc_get_comp_channel_fd");
  *fd = channel->fd;
  return 0;
}

SOFTMRC_EXPORT int mrc_destroy_comp_channel(mrc_comp_channel* channel) {
  if (softmrc::client::is_remote(channel)) return softmrc::remote::destroy_comp_channel(channel);
  if (channel == nullptr) return fail(EINVAL, "mrc_destroy_comp_channel");
  mrc_context* ctx = channel->ctx;
  {
    std::lock_guard<std::mutex> lk(ctx->dev->mu);
    if (!ctx->channels.count(channel)) return fail(EINVAL, "mrc_destroy_comp_channel");
    if (channel->cqs > 0) return fail(EBUSY, "mrc_destroy_comp_channel: CQs still use it");
    ctx->channels.erase(channel);
  }
  close(channel->fd);
  delete channel;
  return 0;
}

// ---- CQs

}  // extern "C"

mrc_cq* softmrc::create_cq(mrc_context* ctx, int cqe, void* cq_context, mrc_comp_channel* channel,
                           int comp_vector, bool ev_cq) {
  if (!valid_ctx(ctx)) return fail_null(EINVAL, "mrc_create_cq: not a context");
  const auto& caps = softmrc::device_caps();
  if (cqe <= 0 || static_cast<uint32_t>(cqe) > caps.max_cqe)
    return fail_null(EINVAL, "mrc_create_cq: cqe out of range");
  if (comp_vector != 0) return fail_null(EINVAL, "mrc_create_cq: the device has 1 vector");
  softmrc_device* dev = ctx->dev;
  if (channel != nullptr) {
    std::lock_guard<std::mutex> lk(dev->mu);
    if (!ctx->channels.count(channel))
      return fail_null(EINVAL, "mrc_create_cq: channel of another context");
  }
  auto* cq = new mrc_cq;
  cq->ctx = ctx;
  cq->cqe = cqe;
  cq->cq_context = cq_context;
  cq->channel = channel;
  cq->ev_event_cq = ev_cq;
  engine::Status st;
  dev->with_engine(
      [&](engine::Endpoint& ep) {
        if (!ev_cq) {
          st = ep.create_cq(static_cast<uint32_t>(cqe), cq->engine_cq);
          if (!st.ok()) return;
        }
        std::lock_guard<std::mutex> lk(dev->mu);
        if (ev_cq) {
          dev->ev_event_cqs.push_back(cq);
        } else {
          dev->cq_by_engine_id[cq->engine_cq] = cq;
        }
        ctx->cqs.insert(cq);
        if (channel) ++channel->cqs;
      },
      false);
  if (!st.ok()) {
    delete cq;
    fail_status(st);
    return nullptr;
  }
  return cq;
}

extern "C" {

SOFTMRC_EXPORT mrc_cq* mrc_create_cq(mrc_context* ctx, int cqe, void* cq_context,
                                     mrc_comp_channel* channel, int comp_vector) {
  if (softmrc::client::is_remote(ctx))
    return softmrc::remote::create_cq(ctx, cqe, cq_context, channel, comp_vector, false);
  return softmrc::create_cq(ctx, cqe, cq_context, channel, comp_vector, false);
}

SOFTMRC_EXPORT int mrc_poll_cq(mrc_cq* cq, int num_entries, ibv_wc* wc) {
  if (softmrc::client::is_remote(cq)) return softmrc::remote::poll_cq(cq, num_entries, wc);
  if (cq == nullptr || num_entries < 0 || (num_entries > 0 && wc == nullptr) || cq->ev_event_cq)
    return fail(EINVAL, "mrc_poll_cq");
  // Loopback has no loop thread: polling is what moves time forward there.
  if (!cq->ctx->dev->io) cq->ctx->dev->with_engine([](engine::Endpoint&) {}, false);
  int n = 0;
  {
    std::lock_guard<std::mutex> lk(cq->mu);
    while (n < num_entries && !cq->wcs.empty()) {
      wc[n++] = cq->wcs.front();
      cq->wcs.pop_front();
    }
  }
  // An empty poll is an application spinning for completions that the loop thread has to
  // produce: on a host with fewer free cores than spinning threads, give the core away.
  if (n == 0 && cq->ctx->dev->io) sched_yield();
  return n;
}

SOFTMRC_EXPORT int mrc_destroy_cq(mrc_cq* cq) {
  if (softmrc::client::is_remote(cq)) return softmrc::remote::destroy_cq(cq);
  if (!valid_cq(cq)) return fail(EINVAL, "mrc_destroy_cq: not a CQ");
  mrc_context* ctx = cq->ctx;
  softmrc_device* dev = ctx->dev;
  {
    std::lock_guard<std::mutex> lk(dev->mu);
    for (mrc_qp* qp : ctx->qps)
      if (qp->init.send_cq == cq || qp->init.recv_cq == cq)
        return fail(EBUSY, "mrc_destroy_cq: a QP uses the CQ");
  }
  {
    // Every event handed out must have been acknowledged (ibv_destroy_cq's rule).
    std::unique_lock<std::mutex> lk(cq->mu);
    cq->acked_cv.wait(lk, [&] { return cq->events_acked.load() >= cq->events_delivered.load(); });
  }
  dev->with_engine(
      [&](engine::Endpoint&) {
        std::lock_guard<std::mutex> lk(dev->mu);
        dev->cq_by_engine_id.erase(cq->engine_cq);
        dev->ev_event_cqs.erase(std::remove(dev->ev_event_cqs.begin(), dev->ev_event_cqs.end(), cq),
                                dev->ev_event_cqs.end());
        ctx->cqs.erase(cq);
        if (cq->channel) {
          --cq->channel->cqs;
          std::lock_guard<std::mutex> lc(cq->channel->mu);
          auto& evs = cq->channel->events;
          evs.erase(std::remove(evs.begin(), evs.end(), cq), evs.end());
        }
      },
      false);
  delete cq;
  return 0;
}

SOFTMRC_EXPORT int mrc_req_notify_cq(mrc_cq* cq, int solicited_only) {
  if (softmrc::client::is_remote(cq)) return softmrc::remote::req_notify_cq(cq, solicited_only);
  (void)solicited_only;  // every MRC completion is a WRITE: none is "solicited"
  if (!valid_cq(cq)) return fail(EINVAL, "mrc_req_notify_cq");
  if (cq->channel == nullptr) return fail(EINVAL, "mrc_req_notify_cq: the CQ has no channel");
  cq->ctx->dev->with_engine(
      [&](engine::Endpoint&) {
        std::lock_guard<std::mutex> lk(cq->mu);
        cq->armed = true;
      },
      false);
  return 0;
}

SOFTMRC_EXPORT int mrc_get_cq_event(mrc_comp_channel* channel, mrc_cq** cq, void** cq_context) {
  if (softmrc::client::is_remote(channel) && cq != nullptr && cq_context != nullptr)
    return softmrc::remote::get_cq_event(channel, cq, cq_context);
  if (channel == nullptr || cq == nullptr || cq_context == nullptr)
    return fail(EINVAL, "mrc_get_cq_event");
  uint64_t v;
  for (;;) {
    const ssize_t r = read(channel->fd, &v, sizeof v);
    if (r == static_cast<ssize_t>(sizeof v)) break;
    if (r < 0 && errno == EINTR) continue;
    return -1;  // EAGAIN on a non-blocking descriptor, as ibv_get_cq_event
  }
  std::lock_guard<std::mutex> lk(channel->mu);
  if (channel->events.empty()) return fail(EAGAIN, "mrc_get_cq_event: the CQ went away");
  mrc_cq* c = channel->events.front();
  channel->events.pop_front();
  c->events_delivered.fetch_add(1);
  *cq = c;
  *cq_context = c->cq_context;
  return 0;
}

SOFTMRC_EXPORT void mrc_ack_cq_events(mrc_cq* cq, unsigned int nevents) {
  if (softmrc::client::is_remote(cq)) return softmrc::remote::ack_cq_events(cq, nevents);
  if (cq == nullptr) return;
  std::lock_guard<std::mutex> lk(cq->mu);
  cq->events_acked.fetch_add(nevents);
  cq->acked_cv.notify_all();
}

// ---- QP hints

static bool valid_hint_values(const mrc_qp_hint_attr& a, int mask) {
  if ((mask & MRC_QP_HINT_NUM_QPS_PER_PEER) && a.num_qps_per_peer < 0) return false;
  if ((mask & MRC_QP_HINT_NUM_SEND_PEERS) && a.num_send_peers < 0) return false;
  if ((mask & MRC_QP_HINT_NUM_REMOTE_RECV_PEERS) && a.num_remote_recv_peers < 0) return false;
  constexpr int known = MRC_QP_HINT_NUM_QPS_PER_PEER | MRC_QP_HINT_NUM_SEND_PEERS |
                        MRC_QP_HINT_NUM_REMOTE_RECV_PEERS | MRC_QP_HINT_VENDOR_CFG;
  return (mask & ~known) == 0;
}

static void copy_hint(mrc_qp_hint_attr& to, const mrc_qp_hint_attr& from, int mask) {
  if (mask & MRC_QP_HINT_NUM_QPS_PER_PEER) to.num_qps_per_peer = from.num_qps_per_peer;
  if (mask & MRC_QP_HINT_NUM_SEND_PEERS) to.num_send_peers = from.num_send_peers;
  if (mask & MRC_QP_HINT_NUM_REMOTE_RECV_PEERS)
    to.num_remote_recv_peers = from.num_remote_recv_peers;
  if (mask & MRC_QP_HINT_VENDOR_CFG)
    std::memcpy(to.vendor_cfg, from.vendor_cfg, sizeof to.vendor_cfg);
}

SOFTMRC_EXPORT mrc_qp_hint* mrc_create_qp_hint(mrc_context* ctx, mrc_qp_hint_init_attr* init_attr) {
  if (softmrc::client::is_remote(ctx)) return softmrc::remote::create_qp_hint(ctx, init_attr);
  if (!valid_ctx(ctx) || init_attr == nullptr) return fail_null(EINVAL, "mrc_create_qp_hint");
  const int all = MRC_QP_HINT_NUM_QPS_PER_PEER | MRC_QP_HINT_NUM_SEND_PEERS |
                  MRC_QP_HINT_NUM_REMOTE_RECV_PEERS | MRC_QP_HINT_VENDOR_CFG;
  if (!valid_hint_values(init_attr->attr, all))
    return fail_null(EINVAL, "mrc_create_qp_hint: negative count");
  std::lock_guard<std::mutex> lk(ctx->dev->mu);
  if (ctx->hints.size() >= 1024) return fail_null(ENOMEM, "mrc_create_qp_hint: max_qp_hint");
  auto* h = new mrc_qp_hint;
  h->ctx = ctx;
  h->attr = init_attr->attr;
  ctx->hints.insert(h);
  return h;
}

static bool valid_hint(mrc_qp_hint* h) {
  if (h == nullptr || !valid_ctx(h->ctx)) return false;
  std::lock_guard<std::mutex> lk(h->ctx->dev->mu);
  return h->ctx->hints.count(h) != 0;
}

SOFTMRC_EXPORT int mrc_destroy_qp_hint(mrc_qp_hint* qp_hint) {
  if (softmrc::client::is_remote(qp_hint)) return softmrc::remote::destroy_qp_hint(qp_hint);
  if (!valid_hint(qp_hint)) return fail(EINVAL, "mrc_destroy_qp_hint");
  std::lock_guard<std::mutex> lk(qp_hint->ctx->dev->mu);
  if (qp_hint->qps > 0) return fail(EBUSY, "mrc_destroy_qp_hint: QPs use it");
  qp_hint->ctx->hints.erase(qp_hint);
  delete qp_hint;
  return 0;
}

SOFTMRC_EXPORT int mrc_query_qp_hint(mrc_qp_hint* qp_hint, mrc_qp_hint_attr* attr, int mask) {
  if (softmrc::client::is_remote(qp_hint))
    return softmrc::remote::query_qp_hint(qp_hint, attr, mask, false);
  if (!valid_hint(qp_hint) || attr == nullptr || !valid_hint_values(qp_hint->attr, mask))
    return fail(EINVAL, "mrc_query_qp_hint");
  std::lock_guard<std::mutex> lk(qp_hint->ctx->dev->mu);
  copy_hint(*attr, qp_hint->attr, mask);
  return 0;
}

SOFTMRC_EXPORT int mrc_modify_qp_hint(mrc_qp_hint* qp_hint, mrc_qp_hint_attr* attr, int mask) {
  if (softmrc::client::is_remote(qp_hint))
    return softmrc::remote::query_qp_hint(qp_hint, attr, mask, true);
  if (!valid_hint(qp_hint) || attr == nullptr || !valid_hint_values(*attr, mask))
    return fail(EINVAL, "mrc_modify_qp_hint");
  std::lock_guard<std::mutex> lk(qp_hint->ctx->dev->mu);
  copy_hint(qp_hint->attr, *attr, mask);
  return 0;
}

// ---- QPs

static bool valid_qp(mrc_qp* qp) {
  if (qp == nullptr || !valid_ctx(qp->ctx)) return false;
  std::lock_guard<std::mutex> lk(qp->ctx->dev->mu);
  return qp->ctx->qps.count(qp) != 0;
}

SOFTMRC_EXPORT mrc_qp* mrc_create_qp(mrc_context* ctx, mrc_qp_init_attr* a) {
  if (softmrc::client::is_remote(ctx)) return softmrc::remote::create_qp(ctx, a);
  if (!valid_ctx(ctx) || a == nullptr) return fail_null(EINVAL, "mrc_create_qp");
  if (!valid_cq(a->send_cq) || !valid_cq(a->recv_cq) || a->send_cq->ctx != ctx ||
      a->recv_cq->ctx != ctx || a->send_cq->ev_event_cq || a->recv_cq->ev_event_cq)
    return fail_null(EINVAL, "mrc_create_qp: send_cq/recv_cq not CQs of this context");
  if (a->pd == nullptr || a->pd->context != ctx->vctx)
    return fail_null(EINVAL, "mrc_create_qp: pd is not a PD of the context's device");
  const uint32_t protocol_version = softmrc::raw(a->protocol_version);
  if (protocol_version != MRC_PROTOCOL_VERSION_0 && protocol_version != MRC_PROTOCOL_VERSION_1)
    return fail_null(EINVAL, "mrc_create_qp: protocol_version is not one supported bit");
  if (a->send_ops_flags &
      ~static_cast<uint64_t>(IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM))
    return fail_null(EINVAL, "mrc_create_qp: send_ops_flags beyond RDMA WRITE (with IMM)");
  const auto& caps = softmrc::device_caps();
  if (a->cap.max_send_wr > caps.max_send_wr || a->cap.max_recv_wr > caps.max_recv_wr ||
      a->cap.max_send_sge > engine::kMaxSge || a->cap.max_recv_sge > engine::kMaxSge)
    return fail_null(EINVAL, "mrc_create_qp: cap beyond the device's limits");
  if (a->cap.max_inline_data > 0)
    return fail_null(EINVAL, "mrc_create_qp: inline data is not supported");
  engine::QpInitAttr init;
  init.qp_context = reinterpret_cast<uintptr_t>(a->qp_context);
  init.send_cq = a->send_cq->engine_cq;
  init.recv_cq = a->recv_cq->engine_cq;
  init.cap.max_send_wr = std::max<uint32_t>(a->cap.max_send_wr, 1);
  init.cap.max_recv_wr = std::max<uint32_t>(a->cap.max_recv_wr, 1);
  init.cap.max_send_sge = std::max<uint32_t>(a->cap.max_send_sge, 1);
  init.cap.max_recv_sge = std::max<uint32_t>(a->cap.max_recv_sge, 1);
  init.sq_sig_all = a->sq_sig_all != 0;
  init.protocol_version = protocol_version;
  init.pd = a->pd->handle;
  softmrc_device* dev = ctx->dev;
  auto* qp = new mrc_qp;
  qp->ctx = ctx;
  qp->init = *a;
  engine::Status st;
  dev->with_engine(
      [&](engine::Endpoint& ep) {
        st = ep.create_qp(init, qp->qpn);
        if (!st.ok()) return;
        std::lock_guard<std::mutex> lk(dev->mu);
        dev->qp_by_qpn[qp->qpn] = qp;
        ctx->qps.insert(qp);
      },
      false);
  if (!st.ok()) {
    delete qp;
    fail_status(st);
    return nullptr;
  }
  return qp;
}

SOFTMRC_EXPORT int mrc_destroy_qp(mrc_qp* qp) {
  if (softmrc::client::is_remote(qp)) return softmrc::remote::destroy_qp(qp);
  if (!valid_qp(qp)) return fail(EINVAL, "mrc_destroy_qp: not a QP");
  softmrc_device* dev = qp->ctx->dev;
  engine::Status st;
  dev->with_engine(
      [&](engine::Endpoint& ep) {
        st = ep.destroy_qp(qp->qpn);
        std::lock_guard<std::mutex> lk(dev->mu);
        dev->qp_by_qpn.erase(qp->qpn);
        qp->ctx->qps.erase(qp);
        if (qp->hint) --qp->hint->qps;
        if (qp->ev_profile_id) --dev->ev_profile_users[*qp->ev_profile_id];
        if (qp->cc_profile_id) --dev->cc_profile_users[*qp->cc_profile_id];
      },
      false);
  delete qp;
  return 0;
}

SOFTMRC_EXPORT int mrc_get_qpn(mrc_qp* qp, uint32_t* qpn) {
  if (softmrc::client::is_remote(qp) && qpn != nullptr) {
    *qpn = qp->qpn;
    return 0;
  }
  if (!valid_qp(qp) || qpn == nullptr) return fail(EINVAL, "mrc_get_qpn");
  *qpn = qp->qpn;
  return 0;
}

SOFTMRC_EXPORT int mrc_modify_qp(mrc_qp* qp, ibv_qp_attr* vattr, int vattr_mask, mrc_qp_attr* mattr,
                                 int mrc_mask) {
  if (softmrc::client::is_remote(qp))
    return softmrc::remote::modify_qp(qp, vattr, vattr_mask, mattr, mrc_mask);
  if (!valid_qp(qp)) return fail(EINVAL, "mrc_modify_qp: not a QP");
  if (vattr == nullptr && vattr_mask != 0) return fail(EINVAL, "mrc_modify_qp: vattr NULL");
  if (mattr == nullptr && mrc_mask != 0) return fail(EINVAL, "mrc_modify_qp: mrc_attr NULL");
  if (vattr_mask & ~(kTakenVerbs | kIgnoredVerbs))
    return fail(EINVAL, "mrc_modify_qp: verbs attribute an MRC QP does not have");
  softmrc_device* dev = qp->ctx->dev;
  const int vmask = vattr_mask & kTakenVerbs;
  engine::QpAttr a;
  uint32_t emask = static_cast<uint32_t>(vmask);
  bool ok = true;
  if (vmask & IBV_QP_STATE) a.qp_state = to_engine(softmrc::raw(vattr->qp_state), ok);
  if (!ok) return fail(EINVAL, "mrc_modify_qp: qp_state");
  if (vmask & IBV_QP_CUR_STATE) a.cur_qp_state = to_engine(softmrc::raw(vattr->cur_qp_state), ok);
  if (!ok) return fail(EINVAL, "mrc_modify_qp: cur_qp_state");
  if (vmask & IBV_QP_ACCESS_FLAGS) a.qp_access_flags = vattr->qp_access_flags;
  if (vmask & IBV_QP_PKEY_INDEX) {
    if (vattr->pkey_index != 0) return fail(EINVAL, "mrc_modify_qp: the P_Key table has 1 entry");
    a.pkey_index = vattr->pkey_index;
  }
  if (vmask & IBV_QP_PATH_MTU) {
    a.path_mtu = mtu_bytes(softmrc::raw(vattr->path_mtu));
    if (a.path_mtu == 0) return fail(EINVAL, "mrc_modify_qp: path_mtu");
  }
  if (vmask & IBV_QP_RQ_PSN) a.rq_psn = vattr->rq_psn;
  if (vmask & IBV_QP_SQ_PSN) a.sq_psn = vattr->sq_psn;
  if (vmask & IBV_QP_DEST_QPN) a.dest_qp_num = vattr->dest_qp_num;
  if (vmask & IBV_QP_AV) {
    const ibv_ah_attr& ah = vattr->ah_attr;
    if (!ah.is_global) return fail(EINVAL, "mrc_modify_qp: IBV_QP_AV needs a GRH (RoCEv2)");
    const uint8_t port = ah.port_num ? ah.port_num : 1;
    if (port > dev->ports.size()) return fail(EINVAL, "mrc_modify_qp: ah_attr.port_num");
    const auto& table = dev->ports[port - 1].gids;
    if (ah.grh.sgid_index >= table.size())
      return fail(EINVAL, "mrc_modify_qp: sgid_index beyond the GID table");
    const softmrc::GidEntry& sgid = table[ah.grh.sgid_index];
    if (!sgid.roce_v2 || sgid.gid != dev->node_gid)
      return fail(EINVAL,
                  "mrc_modify_qp: sgid_index must name the device's RoCEv2 GID (the engine "
                  "speaks from one node address; see README.md)");
    std::memcpy(a.dgid.data(), ah.grh.dgid.raw, 16);
    qp->sgid_index = ah.grh.sgid_index;
  }
  engine::MrcQpAttr m;
  uint32_t mmask = static_cast<uint32_t>(mrc_mask);
  mrc_qp_hint* new_hint = nullptr;
  if (mattr != nullptr) {
    m.max_wimm = mattr->wimm.max_wimm;
    m.max_wimm_dest = mattr->wimm.max_wimm_dest;
    m.mpr = mattr->mpr.mpr;
    m.mpr_dest = mattr->mpr.mpr_dest;
    m.timeout = mattr->timeout;
    m.retry.linear_cnt = mattr->retry.linear_cnt;
    m.retry.exp_cnt = mattr->retry.exp_cnt;
    m.cap = mattr->cap;
    if (mrc_mask & MRC_QP_HINT) {
      new_hint = mattr->qp_hint;
      if (new_hint != nullptr && (!valid_hint(new_hint) || new_hint->ctx != qp->ctx))
        return fail(EINVAL, "mrc_modify_qp: qp_hint is not a hint of this context");
      if (new_hint) {
        m.hint = engine::QpHint{static_cast<uint32_t>(new_hint->attr.num_qps_per_peer),
                                static_cast<uint32_t>(new_hint->attr.num_send_peers),
                                static_cast<uint32_t>(new_hint->attr.num_remote_recv_peers)};
      }
    }
  }
  engine::Status st;
  int rc = 0;
  dev->with_engine(
      [&](engine::Endpoint& ep) {
        engine::QpAttr cur;
        engine::MrcQpAttr curm;
        if (st = ep.query_qp(qp->qpn, cur, curm); !st.ok()) return;
        const engine::QpState from = cur.qp_state;
        const engine::QpState to = (emask & engine::kQpState) ? a.qp_state : from;
        std::lock_guard<std::mutex> lk(dev->mu);
        // Controller profiles named by id must be ONLINE; the engine knows them by its own id.
        std::optional<uint64_t> ev_ctl, cc_ctl;
        if (mmask & MRC_QP_EV_PROFILE_ID) {
          const auto eid = online_engine_id(dev->ev_profiles, mattr->profile.ev_profile_id);
          if (!eid) {
            rc = EINVAL;
            return;
          }
          ev_ctl = mattr->profile.ev_profile_id;
          m.ev_profile_id = *eid;
        }
        if (mmask & MRC_QP_CC_PROFILE_ID) {
          const auto eid = online_engine_id(dev->cc_profiles, mattr->profile.cc_profile_id);
          if (!eid) {
            rc = EINVAL;
            return;
          }
          cc_ctl = mattr->profile.cc_profile_id;
          m.cc_profile_id = *eid;
        }
        // Device defaults for the MRC attributes a transition requires and the application
        // left out.
        uint32_t fill = 0;
        if (from == engine::QpState::kReset && to == engine::QpState::kInit) {
          fill = MRC_QP_HINT | MRC_QP_EV_PROFILE_ID | MRC_QP_CC_PROFILE_ID;
        } else if (from == engine::QpState::kInit && to == engine::QpState::kRtr) {
          fill = MRC_QP_MAX_WIMM_DEST | MRC_QP_MPR_DEST;
        } else if (from == engine::QpState::kRtr && to == engine::QpState::kRts) {
          fill = MRC_QP_MAX_WIMM | MRC_QP_MPR | MRC_QP_RETRY_CNT | MRC_QP_TIMEOUT;
        }
        fill &= ~mmask;
        if (fill & MRC_QP_EV_PROFILE_ID) m.ev_profile_id = dev->default_ev_engine_id;
        if (fill & MRC_QP_CC_PROFILE_ID) m.cc_profile_id = dev->default_cc_engine_id;
        if (fill & MRC_QP_MAX_WIMM_DEST) m.max_wimm_dest = kDefaultMaxWimm;
        if (fill & MRC_QP_MPR_DEST) m.mpr_dest = kDefaultMpr;
        if (fill & MRC_QP_MAX_WIMM) m.max_wimm = kDefaultMaxWimm;
        if (fill & MRC_QP_MPR) m.mpr = kDefaultMpr;
        if (fill & MRC_QP_TIMEOUT) m.timeout = kDefaultTimeout;
        if (fill & MRC_QP_RETRY_CNT) {
          m.retry.linear_cnt = kDefaultLinearRetry;
          m.retry.exp_cnt = kDefaultExpRetry;
        }
        // The path MTU cannot exceed what the ports carry.
        if (emask & engine::kQpPathMtu) {
          uint32_t port_mtu = UINT32_MAX;
          for (const auto& p : dev->ports) port_mtu = std::min(port_mtu, p.mtu);
          if (port_mtu > 128 && a.path_mtu > port_mtu - 128) {
            uint32_t fit = 256;
            while (fit * 2 <= port_mtu - 128 && fit < 4096) fit *= 2;
            a.path_mtu = fit;  // like a verbs device, the path MTU is capped at the port's
          }
        }
        st = ep.modify_qp(qp->qpn, a, emask, m, mmask | fill);
        if (!st.ok()) return;
        if (mmask & MRC_QP_HINT) {
          if (qp->hint) --qp->hint->qps;
          qp->hint = new_hint;
          if (qp->hint) ++qp->hint->qps;
        }
        if ((mmask | fill) & MRC_QP_EV_PROFILE_ID) {
          if (qp->ev_profile_id) --dev->ev_profile_users[*qp->ev_profile_id];
          qp->ev_profile_id = ev_ctl;
          if (ev_ctl) {
            ++dev->ev_profile_users[*ev_ctl];
            // EVs the controller denied stay denied for new QPs of the profile.
            const auto& p = dev->ev_profiles[*ev_ctl];
            for (size_t idx : p.denied)
              for (const auto& [key, i] : p.index_of_wev)
                if (i == idx)
                  (void)ep.modify_ev_state(*p.engine_id, key.first, engine::EvState::kDenied);
          }
        }
        if ((mmask | fill) & MRC_QP_CC_PROFILE_ID) {
          if (qp->cc_profile_id) --dev->cc_profile_users[*qp->cc_profile_id];
          qp->cc_profile_id = cc_ctl;
          if (cc_ctl) ++dev->cc_profile_users[*cc_ctl];
        }
        if (mmask & MRC_QP_VENDOR_CFG)
          std::memcpy(qp->vendor_cfg, mattr->vendor_cfg, sizeof qp->vendor_cfg);
        if ((vattr_mask & IBV_QP_PORT) && vattr->port_num) qp->port_num = vattr->port_num;
      },
      false);
  if (rc) return fail(rc, "mrc_modify_qp: profile id names no ONLINE profile");
  if (!st.ok()) return fail_status(st);
  if (vmask & IBV_QP_AV) {
    const uint8_t port = vattr->ah_attr.port_num ? vattr->ah_attr.port_num : 1;
    (void)port;
    wire::Ipv6Addr dgid;
    std::memcpy(dgid.data(), vattr->ah_attr.grh.dgid.raw, 16);
    // Each port needs its next hop towards the peer (the QP sprays over every port).
    for (size_t p = 0; p < dev->ports.size(); ++p)
      if (resolve_port_next_hop(dev, p, dgid) != 0) return -1;
  }
  return 0;
}

SOFTMRC_EXPORT int mrc_query_qp(mrc_qp* qp, ibv_qp_attr* vattr, int vattr_mask, mrc_qp_attr* mattr,
                                int mrc_mask, mrc_qp_init_attr* init_attr) {
  if (softmrc::client::is_remote(qp))
    return softmrc::remote::query_qp(qp, vattr, vattr_mask, mattr, mrc_mask, init_attr);
  if (!valid_qp(qp)) return fail(EINVAL, "mrc_query_qp: not a QP");
  if ((vattr_mask && vattr == nullptr) || (mrc_mask && mattr == nullptr))
    return fail(EINVAL, "mrc_query_qp: NULL attribute structure");
  engine::QpAttr a;
  engine::MrcQpAttr m;
  engine::Status st;
  qp->ctx->dev->with_engine([&](engine::Endpoint& ep) { st = ep.query_qp(qp->qpn, a, m); }, false);
  if (!st.ok()) return fail_status(st);
  if (vattr != nullptr) {
    std::memset(vattr, 0, sizeof *vattr);
    vattr->qp_state = to_verbs(a.qp_state);
    vattr->cur_qp_state = vattr->qp_state;
    vattr->qp_access_flags = static_cast<int>(a.qp_access_flags);
    vattr->pkey_index = a.pkey_index;
    vattr->path_mtu = mtu_enum(a.path_mtu);
    vattr->rq_psn = a.rq_psn;
    vattr->sq_psn = a.sq_psn;
    vattr->dest_qp_num = a.dest_qp_num;
    vattr->port_num = qp->port_num;
    vattr->ah_attr.is_global = 1;
    vattr->ah_attr.port_num = 1;
    vattr->ah_attr.grh.sgid_index = qp->sgid_index;
    std::memcpy(vattr->ah_attr.grh.dgid.raw, a.dgid.data(), 16);
    vattr->cap = qp->init.cap;
  }
  if (mattr != nullptr) {
    std::memset(mattr, 0, sizeof *mattr);
    mattr->mpr.mpr = m.mpr;
    mattr->mpr.mpr_dest = m.mpr_dest;
    mattr->wimm.max_wimm = m.max_wimm;
    mattr->wimm.max_wimm_dest = m.max_wimm_dest;
    mattr->timeout = m.timeout;
    mattr->retry.linear_cnt = m.retry.linear_cnt;
    mattr->retry.exp_cnt = m.retry.exp_cnt;
    mattr->profile.ev_profile_id = qp->ev_profile_id.value_or(0);
    mattr->profile.cc_profile_id = qp->cc_profile_id.value_or(0);
    mattr->qp_hint = qp->hint;
    mattr->cap = m.cap;
    std::memcpy(mattr->vendor_cfg, qp->vendor_cfg, sizeof mattr->vendor_cfg);
  }
  if (init_attr != nullptr) *init_attr = qp->init;
  return 0;
}

SOFTMRC_EXPORT int mrc_post_send(mrc_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr) {
  if (wr != nullptr && softmrc::client::is_remote(qp))
    return softmrc::remote::post_send(qp, wr, bad_wr);
  if (bad_wr) *bad_wr = nullptr;
  if (qp == nullptr || wr == nullptr) {
    if (bad_wr) *bad_wr = wr;
    errno = EINVAL;
    return EINVAL;
  }
  int rc = 0;
  engine::Sge sges[engine::kMaxSge];
  qp->ctx->dev->with_engine([&](engine::Endpoint& ep) {
    for (ibv_send_wr* w = wr; w != nullptr; w = w->next) {
      if ((w->opcode != IBV_WR_RDMA_WRITE && w->opcode != IBV_WR_RDMA_WRITE_WITH_IMM) ||
          w->num_sge < 0 || static_cast<uint32_t>(w->num_sge) > engine::kMaxSge ||
          (w->num_sge > 0 && w->sg_list == nullptr) || (w->send_flags & IBV_SEND_INLINE)) {
        rc = EINVAL;  // MRC moves data only by RDMA WRITE (with immediate)
      } else {
        for (int k = 0; k < w->num_sge; ++k)
          sges[k] = {w->sg_list[k].addr, w->sg_list[k].length, w->sg_list[k].lkey};
        engine::SendWr e;
        e.wr_id = w->wr_id;
        e.opcode = w->opcode == IBV_WR_RDMA_WRITE ? engine::WrOpcode::kRdmaWrite
                                                  : engine::WrOpcode::kRdmaWriteWithImm;
        e.sg_list = std::span<const engine::Sge>(sges, static_cast<size_t>(w->num_sge));
        e.send_flags = w->send_flags & (IBV_SEND_FENCE | IBV_SEND_SIGNALED | IBV_SEND_SOLICITED);
        e.imm_data = ntohl(w->imm_data);
        e.remote_addr = w->wr.rdma.remote_addr;
        e.rkey = w->wr.rdma.rkey;
        engine::Status st = ep.post_send(qp->qpn, e);
        if (!st.ok()) {
          if (softmrc::debug_enabled()) std::fprintf(stderr, "softmrc: %s\n", st.message.c_str());
          rc = st.code == ENOMEM ? ENOMEM : st.code ? st.code : EINVAL;
        }
      }
      if (rc) {
        if (bad_wr) *bad_wr = w;
        return;
      }
    }
  });
  if (rc) errno = rc;
  return rc;
}

SOFTMRC_EXPORT int mrc_post_recv(mrc_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  if (wr != nullptr && softmrc::client::is_remote(qp))
    return softmrc::remote::post_recv(qp, wr, bad_wr);
  if (bad_wr) *bad_wr = nullptr;
  if (qp == nullptr || wr == nullptr) {
    if (bad_wr) *bad_wr = wr;
    errno = EINVAL;
    return EINVAL;
  }
  int rc = 0;
  engine::Sge sges[engine::kMaxSge];
  qp->ctx->dev->with_engine(
      [&](engine::Endpoint& ep) {
        for (ibv_recv_wr* w = wr; w != nullptr; w = w->next) {
          if (w->num_sge < 0 || static_cast<uint32_t>(w->num_sge) > engine::kMaxSge ||
              (w->num_sge > 0 && w->sg_list == nullptr)) {
            rc = EINVAL;
          } else {
            for (int k = 0; k < w->num_sge; ++k)
              sges[k] = {w->sg_list[k].addr, w->sg_list[k].length, w->sg_list[k].lkey};
            engine::RecvWr e;
            e.wr_id = w->wr_id;
            e.sg_list = std::span<const engine::Sge>(sges, static_cast<size_t>(w->num_sge));
            engine::Status st = ep.post_recv(qp->qpn, e);
            if (!st.ok()) {
              if (softmrc::debug_enabled())
                std::fprintf(stderr, "softmrc: %s\n", st.message.c_str());
              rc = st.code ? st.code : EINVAL;
            }
          }
          if (rc) {
            if (bad_wr) *bad_wr = w;
            return;
          }
        }
      },
      false);
  if (rc) errno = rc;
  return rc;
}

// ---- asynchronous events

SOFTMRC_EXPORT int mrc_get_async_event(mrc_context* ctx, mrc_async_event* event) {
  if (softmrc::client::is_remote(ctx) && event != nullptr)
    return softmrc::remote::get_async_event(ctx, event);
  if (!valid_ctx(ctx) || event == nullptr) return fail(EINVAL, "mrc_get_async_event");
  uint64_t v;
  for (;;) {
    const ssize_t r = read(ctx->async_fd, &v, sizeof v);
    if (r == static_cast<ssize_t>(sizeof v)) break;
    if (r < 0 && errno == EINTR) continue;
    return -1;
  }
  std::lock_guard<std::mutex> lk(ctx->async_mu);
  if (ctx->async_events.empty()) return fail(EAGAIN, "mrc_get_async_event");
  *event = ctx->async_events.front();
  ctx->async_events.pop_front();
  return 0;
}

SOFTMRC_EXPORT void mrc_ack_async_event(mrc_async_event* event) {
  (void)event;  // events carry no reference the library must release
}

}  // extern "C"
