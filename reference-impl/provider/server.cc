// softmrcd's side of the device socket: every request names its objects by this connection's
// handles, is checked, and is carried out by the same API functions an in-process application
// calls, on the node's one device (README.md, "One device per node").
#include "reference-impl/provider/server.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <thread>

#include "reference-impl/provider/softmrc.h"

#undef ibv_query_port
#undef ibv_reg_mr

namespace softmrc::server {
namespace {

using devproto::Op;
using devproto::Reader;
using devproto::Writer;

constexpr int kMaxPoll = 1024;
constexpr uint32_t kMaxWrs = 4096;
constexpr uint32_t kMaxArray = 1 << 16;

void log(const std::string& s) {
  std::fprintf(stderr, "softmrcd: %s\n", s.c_str());
}

// CAP_NET_ADMIN in the effective set of a process, from /proc (the kernel's view).
bool pid_has_cap_net_admin(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("CapEff:", 0) != 0) continue;
    const unsigned long long caps = std::stoull(line.substr(7), nullptr, 16);
    return (caps >> CAP_NET_ADMIN) & 1;
  }
  return false;
}

bool page_aligned(uint64_t v) {
  return v % static_cast<uint64_t>(sysconf(_SC_PAGESIZE)) == 0;
}

}  // namespace

bool peer_of(int sock, Peer& out) {
  ucred cr{};
  socklen_t len = sizeof cr;
  if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0) return false;
  out.pid = cr.pid;
  out.uid = cr.uid;
  out.cap_net_admin = pid_has_cap_net_admin(cr.pid);
  return true;
}

Session::Session(Peer peer, ibv_device* device) : peer_(peer), device_(device) {}

Session::~Session() {
  teardown();
}

uint64_t Session::add(Kind k, void* p) {
  const uint64_t id = next_id_++;
  objs_[id] = {k, p};
  ids_[p] = id;
  return id;
}

void* Session::find(uint64_t id, Kind k) const {
  auto it = objs_.find(id);
  return it == objs_.end() || it->second.kind != k ? nullptr : it->second.p;
}

uint64_t Session::id_of(const void* p) const {
  auto it = ids_.find(p);
  return it == ids_.end() ? 0 : it->second;
}

void Session::remove(uint64_t id) {
  auto it = objs_.find(id);
  if (it == objs_.end()) return;
  ids_.erase(it->second.p);
  objs_.erase(it);
}

void Session::release_runs(const std::vector<uint64_t>& starts) {
  for (uint64_t s : starts) {
    auto it = runs_.find(s);
    if (it == runs_.end() || --it->second.refs > 0) continue;
    munmap(reinterpret_cast<void*>(s), it->second.len);
    runs_.erase(it);
  }
}

// Children before parents: QPs, hints, CQs (after acknowledging the CQ events the dead process
// never acknowledged), channels, MRC contexts, MRs, PDs, verbs contexts.
void Session::teardown() {
  const Kind order[] = {Kind::kQp,  Kind::kHint, Kind::kCq, Kind::kChan,
                        Kind::kCtx, Kind::kMr,   Kind::kPd, Kind::kVctx};
  for (Kind k : order) {
    std::vector<uint64_t> ids;
    for (const auto& [id, o] : objs_)
      if (o.kind == k) ids.push_back(id);
    for (uint64_t id : ids) {
      void* p = objs_[id].p;
      switch (k) {
        case Kind::kQp:
          mrc_destroy_qp(static_cast<mrc_qp*>(p));
          break;
        case Kind::kHint:
          mrc_destroy_qp_hint(static_cast<mrc_qp_hint*>(p));
          break;
        case Kind::kCq: {
          auto* cq = static_cast<mrc_cq*>(p);
          const uint64_t owed = cq->events_delivered.load() - cq->events_acked.load();
          if (owed > 0) mrc_ack_cq_events(cq, static_cast<unsigned>(owed));
          mrc_destroy_cq(cq);
          break;
        }
        case Kind::kChan:
          mrc_destroy_comp_channel(static_cast<mrc_comp_channel*>(p));
          break;
        case Kind::kCtx:
          mrc_destroy_context(static_cast<mrc_context*>(p));
          break;
        case Kind::kMr:
          ibv_dereg_mr(static_cast<ibv_mr*>(p));
          release_runs(mr_runs_[id]);
          mr_runs_.erase(id);
          break;
        case Kind::kPd:
          ibv_dealloc_pd(static_cast<ibv_pd*>(p));
          break;
        case Kind::kVctx:
          ibv_close_device(static_cast<ibv_context*>(p));
          break;
      }
      remove(id);
    }
  }
  for (const auto& [start, run] : runs_) munmap(reinterpret_cast<void*>(start), run.len);
  runs_.clear();
}

void Session::handle(const uint8_t* msg, size_t n, std::vector<int>& fds_in,
                     std::vector<uint8_t>& rsp, std::vector<int>& fds_out) {
  // Descriptors the request did not use are closed when it is done.
  struct FdGuard {
    std::vector<int>& fds;
    ~FdGuard() {
      for (int fd : fds)
        if (fd >= 0) close(fd);
      fds.clear();
    }
  } fd_guard{fds_in};
  fds_out.clear();
  Reader r(msg, n);
  Writer out;
  int32_t rc = 0;
  int32_t err = 0;
  auto bad = [&](int e) {
    rc = -1;
    err = e;
  };
  // The result of an API call: rc as it returned, errno when it failed.
  auto result = [&](int v) {
    rc = v;
    err = v != 0 ? errno : 0;
  };
  const auto op = static_cast<Op>(r.get<uint32_t>());
  // Controller calls are judged by the peer's capabilities, not by the device process's: those
  // it had when it connected and, for a controller call, those it has now, as the in-process
  // device judges the calling process at each call (a process that drops CAP_NET_ADMIN loses
  // it here too). The current set can only take away: the pid is read again, and a pid whose
  // process ended and was reused must not lend its capabilities to the connection.
  const bool ctl = op >= Op::kCtlQueryDeviceEx && op < Op::kLast;
  ScopedCallerCaps caller(peer_.cap_net_admin && (!ctl || pid_has_cap_net_admin(peer_.pid)));
  auto obj = [&](Kind k) -> void* { return find(r.get<uint64_t>(), k); };
  // The caller's object `id` of kind k, destroyed by the API's own call; the handle goes only
  // when that call succeeded (EBUSY leaves the object usable).
  auto destroy = [&]<typename T>(Kind k, int (*fn)(T*)) {
    const uint64_t id = r.get<uint64_t>();
    auto* p = static_cast<T*>(find(id, k));
    if (p == nullptr) return bad(EINVAL);
    result(fn(p));
    if (rc == 0) remove(id);
  };
  auto opt_obj = [&](Kind k, bool& okay) -> void* {
    const uint64_t id = r.get<uint64_t>();
    if (id == 0) return nullptr;
    void* p = find(id, k);
    if (p == nullptr) okay = false;
    return p;
  };
  switch (op) {
    case Op::kHello: {
      const uint32_t v = r.get<uint32_t>();
      if (!r.ok() || v != devproto::kVersion) {
        bad(EPROTO);
        break;
      }
      out.put<uint32_t>(devproto::kVersion).put<int32_t>(getpid());
      break;
    }
    case Op::kOpenDevice: {
      ibv_context* c = ibv_open_device(device_);
      if (c == nullptr) {
        bad(errno);
        break;
      }
      out.put<uint64_t>(add(Kind::kVctx, c));
      break;
    }
    case Op::kCloseDevice: {
      const uint64_t id = r.get<uint64_t>();
      auto* c = static_cast<ibv_context*>(find(id, Kind::kVctx));
      if (c == nullptr) {
        bad(EINVAL);
        break;
      }
      bool busy = false;
      for (const auto& [oid, o] : objs_)
        busy = busy || (o.kind == Kind::kPd && static_cast<ibv_pd*>(o.p)->context == c) ||
               (o.kind == Kind::kCtx && static_cast<mrc_context*>(o.p)->vctx == c);
      if (busy) {
        bad(EBUSY);
        break;
      }
      result(ibv_close_device(c));
      if (rc == 0) remove(id);
      break;
    }
    case Op::kQueryDevice: {
      auto* c = static_cast<ibv_context*>(obj(Kind::kVctx));
      if (c == nullptr) {
        bad(EINVAL);
        break;
      }
      ibv_device_attr a{};
      rc = ibv_query_device(c, &a);
      out.bytes(&a, sizeof a);
      break;
    }
    case Op::kQueryPort: {
      auto* c = static_cast<ibv_context*>(obj(Kind::kVctx));
      const uint8_t port = r.get<uint8_t>();
      if (c == nullptr) {
        bad(EINVAL);
        break;
      }
      ibv_port_attr a{};
      rc = ibv_query_port(c, port, reinterpret_cast<_compat_ibv_port_attr*>(&a));
      out.bytes(&a, sizeof a);
      break;
    }
    case Op::kQueryGid: {
      auto* c = static_cast<ibv_context*>(obj(Kind::kVctx));
      const uint8_t port = r.get<uint8_t>();
      const int32_t index = r.get<int32_t>();
      if (c == nullptr) {
        bad(EINVAL);
        break;
      }
      ibv_gid g{};
      result(ibv_query_gid(c, port, index, &g));
      out.bytes(&g, sizeof g);
      break;
    }
    case Op::kAllocPd: {
      auto* c = static_cast<ibv_context*>(obj(Kind::kVctx));
      if (c == nullptr) {
        bad(EINVAL);
        break;
      }
      ibv_pd* pd = ibv_alloc_pd(c);
      if (pd == nullptr) {
        bad(errno);
        break;
      }
      out.put<uint64_t>(add(Kind::kPd, pd)).put<uint32_t>(pd->handle);
      break;
    }
    case Op::kDeallocPd: {
      const uint64_t id = r.get<uint64_t>();
      auto* pd = static_cast<ibv_pd*>(find(id, Kind::kPd));
      if (pd == nullptr) {
        bad(EINVAL);
        break;
      }
      rc = ibv_dealloc_pd(pd);  // verbs: an errno value
      if (rc == 0) remove(id);
      break;
    }
    case Op::kRegMr: {
      auto* pd = static_cast<ibv_pd*>(obj(Kind::kPd));
      const uint64_t addr = r.get<uint64_t>();
      const uint64_t len = r.get<uint64_t>();
      const uint32_t access = r.get<uint32_t>();
      const uint32_t nnew = r.get<uint32_t>();
      if (pd == nullptr || !r.ok() || nnew != fds_in.size() || len == 0 || addr + len < addr) {
        bad(EINVAL);
        break;
      }
      struct NewRun {
        uint64_t start, len;
        int fd;
      };
      std::vector<NewRun> fresh;
      bool okay = true;
      for (uint32_t i = 0; i < nnew && okay; ++i) {
        NewRun nr{r.get<uint64_t>(), r.get<uint64_t>(), fds_in[i]};
        struct stat st {};
        // A memfd sealed against shrinking: a process cannot pull the pages from under the
        // device (a shrunk file would fault the device process on access).
        const int seals = fcntl(nr.fd, F_GET_SEALS);
        okay = r.ok() && nr.len > 0 && page_aligned(nr.start) && page_aligned(nr.len) &&
               nr.start + nr.len > nr.start && fstat(nr.fd, &st) == 0 &&
               static_cast<uint64_t>(st.st_size) >= nr.len && seals >= 0 &&
               (seals & F_SEAL_SHRINK) != 0;
        fresh.push_back(nr);
      }
      const uint32_t nref = r.get<uint32_t>();
      std::vector<uint64_t> refs;
      for (uint32_t i = 0; i < nref && i < kMaxArray && okay; ++i) {
        const uint64_t s = r.get<uint64_t>();
        okay = r.ok() && runs_.count(s) != 0;
        refs.push_back(s);
      }
      if (!okay || !r.ok() || nref >= kMaxArray) {
        bad(EINVAL);
        break;
      }
      // Map the new runs at the process's own addresses; they may not overlap anything the
      // device process has (MAP_FIXED_NOREPLACE), so the MR can only ever reach the process's
      // own pages.
      std::vector<uint64_t> mapped;
      for (const NewRun& nr : fresh) {
        void* want = reinterpret_cast<void*>(nr.start);
        void* got =
            mmap(want, nr.len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED_NOREPLACE, nr.fd, 0);
        if (got != want) {
          const int e = got == MAP_FAILED ? errno : EEXIST;
          if (got != MAP_FAILED) munmap(got, nr.len);
          if (debug_enabled())
            log("reg_mr of pid " + std::to_string(peer_.pid) +
                ": its pages are already in use in the device process (" + std::strerror(e) + ")");
          okay = false;
          break;
        }
        mapped.push_back(nr.start);
        runs_[nr.start] = {nr.len, 0};
      }
      // Every page of the MR must be one of this process's runs.
      std::vector<uint64_t> holds;
      if (okay) {
        std::set<uint64_t> mine(mapped.begin(), mapped.end());
        mine.insert(refs.begin(), refs.end());
        uint64_t at = addr;
        while (okay && at < addr + len) {
          okay = false;
          for (uint64_t s : mine) {
            const Run& run = runs_[s];
            if (at >= s && at < s + run.len) {
              holds.push_back(s);
              at = s + run.len;
              okay = true;
              break;
            }
          }
        }
      }
      ibv_mr* mr = nullptr;
      if (okay) {
        mr = ibv_reg_mr(pd, reinterpret_cast<void*>(addr), len, static_cast<int>(access));
        if (mr == nullptr) err = errno;
      } else {
        err = EADDRINUSE;
      }
      if (mr == nullptr) {
        for (uint64_t s : mapped) {
          munmap(reinterpret_cast<void*>(s), runs_[s].len);
          runs_.erase(s);
        }
        rc = -1;
        if (err == 0) err = EINVAL;
        break;
      }
      for (uint64_t s : holds) ++runs_[s].refs;
      const uint64_t id = add(Kind::kMr, mr);
      mr_runs_[id] = holds;
      out.put<uint64_t>(id).put<uint32_t>(mr->lkey).put<uint32_t>(mr->rkey);
      break;
    }
    case Op::kDeregMr: {
      const uint64_t id = r.get<uint64_t>();
      auto* mr = static_cast<ibv_mr*>(find(id, Kind::kMr));
      if (mr == nullptr) {
        bad(EINVAL);
        break;
      }
      rc = ibv_dereg_mr(mr);
      remove(id);
      release_runs(mr_runs_[id]);
      mr_runs_.erase(id);
      break;
    }
    case Op::kCreateContext: {
      auto* c = static_cast<ibv_context*>(obj(Kind::kVctx));
      const uint8_t has_attr = r.get<uint8_t>();
      mrc_context_attr a{};
      r.blob(a);
      if (c == nullptr || !r.ok()) {
        bad(EINVAL);
        break;
      }
      mrc_context* ctx = mrc_create_context(c, has_attr ? &a : nullptr);
      if (ctx == nullptr) {
        bad(errno);
        break;
      }
      out.put<uint64_t>(add(Kind::kCtx, ctx)).put<uint32_t>(ctx->api_version);
      fds_out.push_back(ctx->async_fd);
      break;
    }
    case Op::kDestroyContext:
      destroy(Kind::kCtx, mrc_destroy_context);
      break;
    case Op::kQueryDeviceEx: {
      auto* c = static_cast<ibv_context*>(obj(Kind::kVctx));
      bool okay = true;
      auto* ctx = static_cast<mrc_context*>(opt_obj(Kind::kCtx, okay));
      if (c == nullptr || !okay || !r.ok()) {
        bad(EINVAL);
        break;
      }
      mrc_device_attr a{};
      int supported = 0;
      result(mrc_query_device_ex(c, ctx, &a, &supported));
      out.put<int32_t>(supported).bytes(&a, sizeof a);
      break;
    }
    case Op::kCreateCompChannel: {
      auto* ctx = static_cast<mrc_context*>(obj(Kind::kCtx));
      if (ctx == nullptr) {
        bad(EINVAL);
        break;
      }
      mrc_comp_channel* ch = nullptr;
      result(mrc_create_comp_channel(ctx, &ch));
      if (rc != 0) break;
      out.put<uint64_t>(add(Kind::kChan, ch));
      fds_out.push_back(ch->fd);
      break;
    }
    case Op::kDestroyCompChannel:
      destroy(Kind::kChan, mrc_destroy_comp_channel);
      break;
    case Op::kCreateCq:
    case Op::kCtlCreateEvEventCq: {
      auto* ctx = static_cast<mrc_context*>(obj(Kind::kCtx));
      const int32_t cqe = r.get<int32_t>();
      bool okay = true;
      auto* ch = static_cast<mrc_comp_channel*>(opt_obj(Kind::kChan, okay));
      const int32_t vector = r.get<int32_t>();
      if (ctx == nullptr || !okay || !r.ok()) {
        bad(EINVAL);
        break;
      }
      mrc_cq* cq = op == Op::kCreateCq ? mrc_create_cq(ctx, cqe, nullptr, ch, vector)
                                       : mrc_ctl_create_ev_event_cq(ctx, cqe, nullptr, ch, vector);
      if (cq == nullptr) {
        bad(errno);
        break;
      }
      // An application CQ's completions go to a ring the application polls without asking
      // (cq_ring.h); the EV event CQ stays a request (the controller polls it rarely).
      uint32_t slots = 0;
      if (op == Op::kCreateCq) {
        auto ring = std::make_unique<cq_ring::Producer>();
        slots = cq_ring::slots_for(cqe);
        if (!ring->create(slots)) {
          const int e = errno;
          mrc_destroy_cq(cq);
          bad(e);
          break;
        }
        fds_out.push_back(ring->fd());
        std::lock_guard<std::mutex> lk(cq->mu);
        cq->ring = std::move(ring);
      }
      out.put<uint64_t>(add(Kind::kCq, cq)).put<uint32_t>(slots).put<uint8_t>(!ctx->dev->io);
      break;
    }
    case Op::kDestroyCq: {
      const uint64_t id = r.get<uint64_t>();
      auto* cq = static_cast<mrc_cq*>(find(id, Kind::kCq));
      if (cq == nullptr) {
        bad(EINVAL);
        break;
      }
      // The device process never blocks on a client's missing acknowledgement: the client
      // library waits for its own acknowledgements before it asks.
      const uint64_t owed = cq->events_delivered.load() - cq->events_acked.load();
      if (owed > 0) {
        bad(EBUSY);
        break;
      }
      result(mrc_destroy_cq(cq));
      if (rc == 0) remove(id);
      break;
    }
    case Op::kPollCq: {
      auto* cq = static_cast<mrc_cq*>(obj(Kind::kCq));
      const int32_t want = r.get<int32_t>();
      if (cq == nullptr || !r.ok() || want < 0 || want > kMaxPoll) {
        bad(EINVAL);
        break;
      }
      std::vector<ibv_wc> wcs(static_cast<size_t>(std::max(want, 1)));
      result(mrc_poll_cq(cq, want, wcs.data()));
      if (rc < 0) break;
      err = 0;
      out.bytes(wcs.data(), static_cast<size_t>(rc) * sizeof(ibv_wc));
      break;
    }
    case Op::kReqNotifyCq: {
      auto* cq = static_cast<mrc_cq*>(obj(Kind::kCq));
      const int32_t sol = r.get<int32_t>();
      if (cq == nullptr || !r.ok()) {
        bad(EINVAL);
        break;
      }
      result(mrc_req_notify_cq(cq, sol));
      break;
    }
    case Op::kGetCqEvent: {
      auto* ch = static_cast<mrc_comp_channel*>(obj(Kind::kChan));
      if (ch == nullptr) {
        bad(EINVAL);
        break;
      }
      // Never block the connection: only take an event the descriptor shows.
      pollfd p{ch->fd, POLLIN, 0};
      if (poll(&p, 1, 0) != 1) {
        bad(EAGAIN);
        break;
      }
      mrc_cq* cq = nullptr;
      void* cq_context = nullptr;
      result(mrc_get_cq_event(ch, &cq, &cq_context));
      if (rc == 0) out.put<uint64_t>(id_of(cq));
      break;
    }
    case Op::kAckCqEvents: {
      auto* cq = static_cast<mrc_cq*>(obj(Kind::kCq));
      const uint32_t nev = r.get<uint32_t>();
      if (cq == nullptr || !r.ok()) {
        bad(EINVAL);
        break;
      }
      // No more than were handed out: the count is the device's, not the client's.
      const uint64_t owed = cq->events_delivered.load() - cq->events_acked.load();
      mrc_ack_cq_events(cq, static_cast<unsigned>(std::min<uint64_t>(nev, owed)));
      break;
    }
    case Op::kCreateQpHint: {
      auto* ctx = static_cast<mrc_context*>(obj(Kind::kCtx));
      mrc_qp_hint_init_attr a{};
      r.blob(a);
      if (ctx == nullptr || !r.ok()) {
        bad(EINVAL);
        break;
      }
      mrc_qp_hint* h = mrc_create_qp_hint(ctx, &a);
      if (h == nullptr) {
        bad(errno);
        break;
      }
      out.put<uint64_t>(add(Kind::kHint, h));
      break;
    }
    case Op::kDestroyQpHint:
      destroy(Kind::kHint, mrc_destroy_qp_hint);
      break;
    case Op::kQueryQpHint:
    case Op::kModifyQpHint: {
      auto* h = static_cast<mrc_qp_hint*>(obj(Kind::kHint));
      mrc_qp_hint_attr a{};
      r.blob(a);
      const int32_t mask = r.get<int32_t>();
      if (h == nullptr || !r.ok()) {
        bad(EINVAL);
        break;
      }
      result(op == Op::kQueryQpHint ? mrc_query_qp_hint(h, &a, mask)
                                    : mrc_modify_qp_hint(h, &a, mask));
      out.bytes(&a, sizeof a);
      break;
    }
    case Op::kCreateQp: {
      auto* ctx = static_cast<mrc_context*>(obj(Kind::kCtx));
      mrc_qp_init_attr a{};
      r.blob(a);
      bool okay = true;
      a.send_cq = static_cast<mrc_cq*>(opt_obj(Kind::kCq, okay));
      a.recv_cq = static_cast<mrc_cq*>(opt_obj(Kind::kCq, okay));
      a.pd = static_cast<ibv_pd*>(opt_obj(Kind::kPd, okay));
      a.qp_context = nullptr;  // the client keeps its own
      if (ctx == nullptr || !okay || !r.ok()) {
        bad(EINVAL);
        break;
      }
      mrc_qp* qp = mrc_create_qp(ctx, &a);
      if (qp == nullptr) {
        bad(errno);
        break;
      }
      out.put<uint64_t>(add(Kind::kQp, qp)).put<uint32_t>(qp->qpn);
      break;
    }
    case Op::kDestroyQp:
      destroy(Kind::kQp, mrc_destroy_qp);
      break;
    case Op::kModifyQp: {
      auto* qp = static_cast<mrc_qp*>(obj(Kind::kQp));
      const uint8_t has_v = r.get<uint8_t>();
      ibv_qp_attr v{};
      r.blob(v);
      const int32_t vmask = r.get<int32_t>();
      const uint8_t has_m = r.get<uint8_t>();
      mrc_qp_attr m{};
      r.blob(m);
      bool okay = true;
      m.qp_hint = static_cast<mrc_qp_hint*>(opt_obj(Kind::kHint, okay));
      const int32_t mmask = r.get<int32_t>();
      if (qp == nullptr || !okay || !r.ok()) {
        bad(EINVAL);
        break;
      }
      result(mrc_modify_qp(qp, has_v ? &v : nullptr, vmask, has_m ? &m : nullptr, mmask));
      break;
    }
    case Op::kQueryQp: {
      auto* qp = static_cast<mrc_qp*>(obj(Kind::kQp));
      const int32_t vmask = r.get<int32_t>();
      const int32_t mmask = r.get<int32_t>();
      const uint8_t want_init = r.get<uint8_t>();
      if (qp == nullptr || !r.ok()) {
        bad(EINVAL);
        break;
      }
      ibv_qp_attr v{};
      mrc_qp_attr m{};
      mrc_qp_init_attr init{};
      result(mrc_query_qp(qp, &v, vmask, &m, mmask, want_init ? &init : nullptr));
      const uint64_t hint = id_of(m.qp_hint);
      m.qp_hint = nullptr;
      const uint64_t scq = id_of(init.send_cq), rcq = id_of(init.recv_cq), pd = id_of(init.pd);
      init.send_cq = init.recv_cq = nullptr;
      init.pd = nullptr;
      init.qp_context = nullptr;
      out.bytes(&v, sizeof v).bytes(&m, sizeof m).put<uint64_t>(hint).bytes(&init, sizeof init);
      out.put<uint64_t>(scq).put<uint64_t>(rcq).put<uint64_t>(pd);
      break;
    }
    case Op::kPostSend:
    case Op::kPostRecv: {
      auto* qp = static_cast<mrc_qp*>(obj(Kind::kQp));
      const uint32_t nwr = r.get<uint32_t>();
      if (qp == nullptr || !r.ok() || nwr == 0 || nwr > kMaxWrs) {
        bad(EINVAL);
        rc = EINVAL;
        break;
      }
      std::vector<ibv_send_wr> swr(op == Op::kPostSend ? nwr : 0);
      std::vector<ibv_recv_wr> rwr(op == Op::kPostRecv ? nwr : 0);
      std::vector<std::vector<ibv_sge>> sges(nwr);
      for (uint32_t i = 0; i < nwr && r.ok(); ++i) {
        const uint64_t wr_id = r.get<uint64_t>();
        uint32_t nsge = 0;
        if (op == Op::kPostSend) {
          ibv_send_wr& w = swr[i];
          w.wr_id = wr_id;
          w.opcode = static_cast<ibv_wr_opcode>(r.get<uint32_t>());
          w.send_flags = r.get<uint32_t>();
          w.imm_data = r.get<uint32_t>();
          w.wr.rdma.remote_addr = r.get<uint64_t>();
          w.wr.rdma.rkey = r.get<uint32_t>();
          nsge = r.get<uint32_t>();
        } else {
          rwr[i].wr_id = wr_id;
          nsge = r.get<uint32_t>();
        }
        if (nsge > 64) {
          bad(EINVAL);
          break;
        }
        sges[i].resize(nsge);
        for (auto& g : sges[i]) {
          g.addr = r.get<uint64_t>();
          g.length = r.get<uint32_t>();
          g.lkey = r.get<uint32_t>();
        }
        if (op == Op::kPostSend) {
          swr[i].num_sge = static_cast<int>(nsge);
          swr[i].sg_list = nsge ? sges[i].data() : nullptr;
          swr[i].next = i + 1 < nwr ? &swr[i + 1] : nullptr;
        } else {
          rwr[i].num_sge = static_cast<int>(nsge);
          rwr[i].sg_list = nsge ? sges[i].data() : nullptr;
          rwr[i].next = i + 1 < nwr ? &rwr[i + 1] : nullptr;
        }
      }
      if (!r.ok() || err != 0) {
        rc = EINVAL;
        err = EINVAL;
        out.put<uint32_t>(0);
        break;
      }
      uint32_t bad_index = 0;
      if (op == Op::kPostSend) {
        ibv_send_wr* b = nullptr;
        rc = mrc_post_send(qp, swr.data(), &b);
        if (b != nullptr) bad_index = static_cast<uint32_t>(b - swr.data());
      } else {
        ibv_recv_wr* b = nullptr;
        rc = mrc_post_recv(qp, rwr.data(), &b);
        if (b != nullptr) bad_index = static_cast<uint32_t>(b - rwr.data());
      }
      err = rc;
      out.put<uint32_t>(bad_index);
      break;
    }
    case Op::kGetAsyncEvent: {
      auto* ctx = static_cast<mrc_context*>(obj(Kind::kCtx));
      if (ctx == nullptr) {
        bad(EINVAL);
        break;
      }
      pollfd p{ctx->async_fd, POLLIN, 0};
      if (poll(&p, 1, 0) != 1) {
        bad(EAGAIN);
        break;
      }
      mrc_async_event ev{};
      result(mrc_get_async_event(ctx, &ev));
      if (rc != 0) break;
      uint64_t element = 0;
      switch (ev.event_type) {
        case IBV_EVENT_QP_FATAL:
        case IBV_EVENT_QP_REQ_ERR:
        case IBV_EVENT_QP_ACCESS_ERR:
          element = id_of(ev.element.qp);
          break;
        case IBV_EVENT_CQ_ERR:
          element = id_of(ev.element.cq);
          break;
        default:
          element = static_cast<uint64_t>(ev.element.port_num);
          break;
      }
      out.put<uint32_t>(ev.event_type).put<uint64_t>(element);
      break;
    }
    case Op::kCtlQueryDeviceEx: {
      auto* c = static_cast<ibv_context*>(obj(Kind::kVctx));
      bool okay = true;
      auto* ctx = static_cast<mrc_context*>(opt_obj(Kind::kCtx, okay));
      if (c == nullptr || !okay || !r.ok()) {
        bad(EINVAL);
        break;
      }
      mrc_ctl_device_attr a{};
      int supported = 0;
      result(mrc_ctl_query_device_ex(c, ctx, &a, &supported));
      a.cc.algorithms = nullptr;  // the client points at its own list
      out.put<int32_t>(supported).bytes(&a, sizeof a);
      break;
    }
    case Op::kCtlQueryPort:
    case Op::kCtlModifyPort: {
      auto* ctx = static_cast<mrc_context*>(obj(Kind::kCtx));
      const uint8_t port = r.get<uint8_t>();
      mrc_ctl_port_attr a{};
      r.blob(a);
      const int32_t mask = r.get<int32_t>();
      if (ctx == nullptr || !r.ok()) {
        bad(EINVAL);
        break;
      }
      result(op == Op::kCtlQueryPort ? mrc_ctl_query_port(ctx, port, &a, mask)
                                     : mrc_ctl_modify_port(ctx, port, &a, mask));
      out.bytes(&a, sizeof a);
      break;
    }
    case Op::kCtlModifyEvFmtProfile:
    case Op::kCtlQueryEvFmtProfile: {
      auto* ctx = static_cast<mrc_context*>(obj(Kind::kCtx));
      const uint64_t pid = r.get<uint64_t>();
      mrc_ctl_ev_fmt_profile_attr a{};
      r.blob(a);
      const int32_t mask = r.get<int32_t>();
      const uint8_t has_fields = r.get<uint8_t>();
      size_t nbytes = 0;
      const uint8_t* fb = r.bytes(nbytes);
      if (ctx == nullptr || !r.ok() || nbytes % sizeof(mrc_ctl_ev_fmt_field) != 0) {
        bad(EINVAL);
        break;
      }
      std::vector<mrc_ctl_ev_fmt_field> fields(nbytes / sizeof(mrc_ctl_ev_fmt_field));
      if (nbytes) std::memcpy(fields.data(), fb, nbytes);
      a.ev_fmt_op.fmt_fields = has_fields ? fields.data() : nullptr;
      // The count the device may use is what it was given, not what the client claims.
      if (has_fields)
        a.ev_fmt_op.fmt_field_count =
            std::min<int>(a.ev_fmt_op.fmt_field_count, static_cast<int>(fields.size()));
      result(op == Op::kCtlModifyEvFmtProfile ? mrc_ctl_modify_ev_fmt_profile(ctx, pid, &a, mask)
                                              : mrc_ctl_query_ev_fmt_profile(ctx, pid, &a, mask));
      a.ev_fmt_op.fmt_fields = nullptr;
      out.bytes(&a, sizeof a).bytes(fields.data(), nbytes);
      break;
    }
    case Op::kCtlModifyEvProfile:
    case Op::kCtlQueryEvProfile: {
      auto* ctx = static_cast<mrc_context*>(obj(Kind::kCtx));
      const uint64_t pid = r.get<uint64_t>();
      mrc_ctl_ev_profile_attr a{};
      r.blob(a);
      const int32_t mask = r.get<int32_t>();
      const uint8_t has_entries = r.get<uint8_t>();
      size_t ebytes = 0;
      const uint8_t* eb = r.bytes(ebytes);
      const uint8_t has_fields = r.get<uint8_t>();
      size_t fbytes = 0;
      const uint8_t* fb = r.bytes(fbytes);
      if (ctx == nullptr || !r.ok() || ebytes % sizeof(mrc_ctl_ev_op_entry) != 0 ||
          fbytes % sizeof(mrc_ctl_ev_field) != 0) {
        bad(EINVAL);
        break;
      }
      std::vector<mrc_ctl_ev_op_entry> entries(ebytes / sizeof(mrc_ctl_ev_op_entry));
      std::vector<mrc_ctl_ev_field> fields(fbytes / sizeof(mrc_ctl_ev_field));
      if (ebytes) std::memcpy(entries.data(), eb, ebytes);
      if (fbytes) std::memcpy(fields.data(), fb, fbytes);
      a.ev_op.entries = has_entries ? entries.data() : nullptr;
      a.ev_fields_op.fields = has_fields ? fields.data() : nullptr;
      if (has_entries)
        a.ev_op.entry_count = std::min<int>(a.ev_op.entry_count, static_cast<int>(entries.size()));
      if (has_fields)
        a.ev_fields_op.field_count =
            std::min<int>(a.ev_fields_op.field_count, static_cast<int>(fields.size()));
      result(op == Op::kCtlModifyEvProfile ? mrc_ctl_modify_ev_profile(ctx, pid, &a, mask)
                                           : mrc_ctl_query_ev_profile(ctx, pid, &a, mask));
      a.ev_op.entries = nullptr;
      a.ev_fields_op.fields = nullptr;
      out.bytes(&a, sizeof a).bytes(entries.data(), ebytes).bytes(fields.data(), fbytes);
      break;
    }
    case Op::kCtlModifyCcProfile:
    case Op::kCtlQueryCcProfile: {
      auto* ctx = static_cast<mrc_context*>(obj(Kind::kCtx));
      const uint64_t pid = r.get<uint64_t>();
      mrc_ctl_cc_profile_attr a{};
      r.blob(a);
      const int32_t mask = r.get<int32_t>();
      const uint8_t has_alg = r.get<uint8_t>();
      size_t alen = 0;
      const uint8_t* alg = r.bytes(alen, 256);
      const uint8_t has_cfg = r.get<uint8_t>();
      mrc_ctl_cc_nscc_cfg cfg{};
      r.blob(cfg);
      if (ctx == nullptr || !r.ok()) {
        bad(EINVAL);
        break;
      }
      std::string alg_s(reinterpret_cast<const char*>(alg), alen);
      a.algorithm = has_alg ? alg_s.c_str() : nullptr;
      a.cc_config = has_cfg ? &cfg : nullptr;
      result(op == Op::kCtlModifyCcProfile ? mrc_ctl_modify_cc_profile(ctx, pid, &a, mask)
                                           : mrc_ctl_query_cc_profile(ctx, pid, &a, mask));
      const bool out_alg = a.algorithm != nullptr;
      const bool out_cfg = a.cc_config != nullptr;
      mrc_ctl_cc_nscc_cfg out_c{};
      if (out_cfg) std::memcpy(&out_c, a.cc_config, sizeof out_c);
      std::string out_a = out_alg ? a.algorithm : "";
      a.algorithm = nullptr;
      a.cc_config = nullptr;
      out.bytes(&a, sizeof a).put<uint8_t>(out_alg).bytes(out_a.data(), out_a.size());
      out.put<uint8_t>(out_cfg).bytes(&out_c, sizeof out_c);
      break;
    }
    case Op::kCtlPollEvEvent: {
      auto* cq = static_cast<mrc_cq*>(obj(Kind::kCq));
      const int32_t want = r.get<int32_t>();
      if (cq == nullptr || !r.ok() || want < 0 || want > kMaxPoll) {
        bad(EINVAL);
        rc = -EINVAL;
        break;
      }
      std::vector<mrc_ctl_ev_event> evs(static_cast<size_t>(std::max(want, 1)));
      rc = mrc_ctl_poll_ev_event(cq, want, evs.data());
      if (rc < 0) break;
      const bool with_state =
          cq->ctx->api_version == 0 || cq->ctx->api_version >= MRC_CTL_API_VER(1, 0, 1);
      const size_t stride =
          with_state ? sizeof(mrc_ctl_ev_event) : (offsetof(mrc_ctl_ev_event, state) + 7) / 8 * 8;
      out.bytes(evs.data(), static_cast<size_t>(rc) * stride);
      break;
    }
    case Op::kCtlEpBatchSendWait: {
      auto* ctx = static_cast<mrc_context*>(obj(Kind::kCtx));
      const uint8_t tc = r.get<uint8_t>();
      const uint32_t optype = r.get<uint32_t>();
      size_t qbytes = 0;
      const uint8_t* qb = r.bytes(qbytes);
      const uint32_t timeout = r.get<uint32_t>();
      if (ctx == nullptr || !r.ok() || qbytes == 0 || qbytes % sizeof(mrc_ctl_ep_req) != 0) {
        bad(EINVAL);
        break;
      }
      const size_t nreq = qbytes / sizeof(mrc_ctl_ep_req);
      std::vector<mrc_ctl_ep_req> reqs(nreq);
      std::memcpy(reqs.data(), qb, qbytes);
      std::vector<mrc_ctl_ep_rsp> rsps(nreq);
      int nrsp = 0;
      mrc_ctl_ep_op_type t;
      std::memcpy(&t, &optype, sizeof t);
      result(mrc_ctl_ep_batch_send_wait(ctx, tc, t, reqs.data(), static_cast<int>(nreq), timeout,
                                        rsps.data(), &nrsp));
      out.put<int32_t>(nrsp).bytes(rsps.data(), static_cast<size_t>(nrsp) * sizeof(mrc_ctl_ep_rsp));
      break;
    }
    default:
      bad(EPROTO);
      break;
  }
  Writer head;
  head.put<int32_t>(rc).put<int32_t>(err);
  rsp = std::move(head.buf());
  rsp.insert(rsp.end(), out.buf().begin(), out.buf().end());
}

namespace {

std::atomic<bool> g_stop{false};

void on_signal(int) {
  g_stop = true;
}

// Connections being served, so that a stopping device ends them (their sessions tear down)
// before it closes the device.
std::mutex g_conns_mu;
std::condition_variable g_conns_cv;
std::set<int> g_conns;

void serve_connection(int sock, ibv_device* device) {
  Peer peer;
  if (!peer_of(sock, peer)) {
    std::lock_guard<std::mutex> lk(g_conns_mu);
    g_conns.erase(sock);
    close(sock);
    g_conns_cv.notify_all();
    return;
  }
  if (debug_enabled())
    log("pid " + std::to_string(peer.pid) + " uid " + std::to_string(peer.uid) +
        (peer.cap_net_admin ? " (CAP_NET_ADMIN)" : "") + " connected");
  {
    Session s(peer, device);
    std::vector<uint8_t> msg, rsp;
    std::vector<int> fds, fds_out;
    for (;;) {
      const ssize_t n = devproto::recv_msg(sock, msg, fds);
      if (n == 0) break;
      if (n < 0) {
        if (errno == EMSGSIZE) continue;  // dropped; the client sees no answer only on misuse
        break;
      }
      s.handle(msg.data(), static_cast<size_t>(n), fds, rsp, fds_out);
      if (!devproto::send_msg(sock, rsp, fds_out)) break;
    }
    if (debug_enabled())
      log("pid " + std::to_string(peer.pid) + " gone, " + std::to_string(s.objects()) +
          " objects torn down");
  }
  std::lock_guard<std::mutex> lk(g_conns_mu);
  g_conns.erase(sock);
  close(sock);
  g_conns_cv.notify_all();
}

}  // namespace

int serve(const std::string& path) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr || n == 0) {
    log("no SoftMRC device");
    return 1;
  }
  ibv_device* device = list[0];  // SoftMRC's device is always first
  // The device process holds the device for its life: the ports, the engine and the runtime
  // are up before the first application connects, and stay up between applications.
  ibv_context* keep = ibv_open_device(device);
  if (keep == nullptr) {
    log(std::string("cannot open softmrc0: ") + std::strerror(errno));
    return 1;
  }
  const int lsock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  if (lsock < 0 || path.size() >= sizeof sa.sun_path) {
    log("socket path too long (at most " + std::to_string(sizeof sa.sun_path - 1) +
        " bytes): " + path);
    return 2;
  }
  // The socket is bound under a temporary name and renamed into place once it listens and has
  // its mode: whoever waits for the path to appear (the API suite starts a device process per
  // test and polls for it) must not connect between bind() and listen() and be refused. Where
  // the temporary name does not fit, the path is bound directly, as before.
  const std::string tmp = path + ".new";
  const std::string& bound = tmp.size() < sizeof sa.sun_path ? tmp : path;
  std::memcpy(sa.sun_path, bound.c_str(), bound.size() + 1);
  unlink(bound.c_str());
  if (bind(lsock, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || listen(lsock, 64) != 0) {
    log(bound + ": " + std::strerror(errno));
    return 1;
  }
  // Any local user may open the device, like /dev/infiniband/uverbs*; privilege is judged per
  // call from the peer's credentials.
  chmod(bound.c_str(), 0666);
  if (&bound != &path && rename(bound.c_str(), path.c_str()) != 0) {
    log(path + ": " + std::strerror(errno));
    unlink(bound.c_str());
    return 1;
  }
  struct sigaction sa_sig {};
  sa_sig.sa_handler = on_signal;
  sigaction(SIGTERM, &sa_sig, nullptr);
  sigaction(SIGINT, &sa_sig, nullptr);
  std::fprintf(stderr, "softmrcd: %s ready on %s\n", ibv_get_device_name(device), path.c_str());
  while (!g_stop) {
    pollfd p{lsock, POLLIN, 0};
    if (poll(&p, 1, 200) != 1) continue;
    const int c = accept4(lsock, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) continue;
    {
      std::lock_guard<std::mutex> lk(g_conns_mu);
      g_conns.insert(c);
    }
    std::thread(serve_connection, c, device).detach();
  }
  unlink(path.c_str());
  close(lsock);
  {
    // End the connections still open (their applications see the device go) and wait for
    // their sessions to tear down, then close the device.
    std::unique_lock<std::mutex> lk(g_conns_mu);
    for (int c : g_conns) shutdown(c, SHUT_RDWR);
    g_conns_cv.wait(lk, [] { return g_conns.empty(); });
  }
  ibv_close_device(keep);
  ibv_free_device_list(list);
  return 0;
}

}  // namespace softmrc::server
