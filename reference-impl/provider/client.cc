// lib_mrc.so in device mode (client.h): the API calls as requests to softmrcd.
#include "reference-impl/provider/client.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "reference-impl/provider/softmrc.h"

namespace softmrc::client {

using devproto::Op;
using devproto::Reader;
using devproto::Writer;

namespace {

std::mutex g_mu;  // opening and closing g_conn
std::atomic<Conn*> g_conn{nullptr};
std::vector<uint8_t> g_rx;  // receive buffer, under the connection's mu

// Wakes every waiter of the process (completion channels, asynchronous events) so that nobody
// stays blocked on a device that is gone; each then sees `dead` and fails.
void mark_dead(Conn* c) {
  if (c->dead.exchange(true)) return;
  std::lock_guard<std::mutex> lk(c->objs_mu);
  const uint64_t one = 1;
  for (mrc_comp_channel* ch : c->chans) (void)!write(ch->fd, &one, sizeof one);
  for (mrc_context* ctx : c->ctxs) (void)!write(ctx->async_fd, &one, sizeof one);
}

void monitor(Conn* c) {
  for (;;) {
    pollfd p[2] = {{c->sock, POLLRDHUP, 0}, {c->stop_fd, POLLIN, 0}};
    if (poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (p[1].revents) return;
    if (p[0].revents & (POLLRDHUP | POLLHUP | POLLERR)) {
      mark_dead(c);
      return;
    }
  }
}

template <typename T>
bool in_set(const std::set<T*>& s, const T* p) {
  Conn* c = g_conn.load();
  if (c == nullptr || p == nullptr) return false;
  std::lock_guard<std::mutex> lk(c->objs_mu);
  return s.count(const_cast<T*>(p)) != 0;
}

}  // namespace

const char* device_socket() {
  const char* v = std::getenv("MRC_SOFT_DEVICE");
  return v != nullptr && *v != '\0' ? v : nullptr;
}

Conn* open_conn() {
  std::lock_guard<std::mutex> lk(g_mu);
  if (Conn* c = g_conn.load()) {
    if (c->dead) {
      errno = EIO;
      return nullptr;
    }
    ++c->refs;
    return c;
  }
  const char* path = device_socket();
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  if (path == nullptr || std::strlen(path) >= sizeof sa.sun_path) {
    errno = EINVAL;
    return nullptr;
  }
  std::strcpy(sa.sun_path, path);
  const int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (s < 0) return nullptr;
  const int buf = 4 << 20;
  setsockopt(s, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
  if (connect(s, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    const int e = errno;
    if (debug_enabled())
      std::fprintf(stderr, "softmrc: MRC_SOFT_DEVICE=%s: %s\n", path, std::strerror(e));
    close(s);
    errno = ENODEV;  // no device process: no device
    return nullptr;
  }
  auto* c = new Conn;
  c->sock = s;
  c->stop_fd = eventfd(0, EFD_CLOEXEC);
  Writer w;
  w.put<uint32_t>(static_cast<uint32_t>(Op::kHello)).put<uint32_t>(devproto::kVersion);
  Reply rep;
  if (!rpc(c, w, rep) || rep.rc != 0) {
    close(s);
    close(c->stop_fd);
    delete c;
    errno = rep.err == EPROTO ? EPROTO : ENODEV;
    return nullptr;
  }
  c->refs = 1;
  c->monitor = std::thread(monitor, c);
  g_conn = c;
  return c;
}

void close_conn(Conn* c) {
  std::lock_guard<std::mutex> lk(g_mu);
  if (c == nullptr || --c->refs > 0) return;
  const uint64_t one = 1;
  (void)!write(c->stop_fd, &one, sizeof one);
  if (c->monitor.joinable()) c->monitor.join();
  close(c->sock);  // the device process tears down whatever is left
  close(c->stop_fd);
  g_conn = nullptr;
  delete c;
}

bool rpc(Conn* c, Writer& req, Reply& rep, const std::vector<int>& fds) {
  rep = Reply{};
  if (c->dead) return false;
  std::lock_guard<std::mutex> lk(c->mu);
  if (!devproto::send_msg(c->sock, req.buf(), fds)) {
    mark_dead(c);
    return false;
  }
  const ssize_t n = devproto::recv_msg(c->sock, g_rx, rep.fds);
  if (n <= 0) {
    if (n == 0 || errno != EMSGSIZE) mark_dead(c);
    rep.err = EIO;
    return false;
  }
  rep.buf.assign(g_rx.begin(), g_rx.begin() + n);
  Reader r(rep.buf.data(), rep.buf.size());
  rep.rc = r.get<int32_t>();
  rep.err = r.get<int32_t>();
  if (!r.ok()) {
    rep.rc = -1;
    rep.err = EPROTO;
    return false;
  }
  rep.off = 8;
  return true;
}

bool is_remote(const mrc_context* p) {
  Conn* c = g_conn.load();
  return c != nullptr && in_set(c->ctxs, p);
}
bool is_remote(const mrc_cq* p) {
  Conn* c = g_conn.load();
  return c != nullptr && in_set(c->cqs, p);
}
bool is_remote(const mrc_comp_channel* p) {
  Conn* c = g_conn.load();
  return c != nullptr && in_set(c->chans, p);
}
bool is_remote(const mrc_qp_hint* p) {
  Conn* c = g_conn.load();
  return c != nullptr && in_set(c->hints, p);
}
bool is_remote(const mrc_qp* p) {
  Conn* c = g_conn.load();
  return c != nullptr && in_set(c->qps, p);
}

int share_range(Conn* c, uint64_t addr, uint64_t len, std::vector<uint64_t>& new_starts,
                std::vector<uint64_t>& new_lens, std::vector<int>& fds,
                std::vector<uint64_t>& ref_starts) {
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t start = addr / page * page;
  const uint64_t end = (addr + len + page - 1) / page * page;
  std::lock_guard<std::mutex> lk(c->objs_mu);
  uint64_t at = start;
  while (at < end) {
    auto it = c->runs.upper_bound(at);
    if (it != c->runs.begin()) {
      auto prev = std::prev(it);
      if (at < prev->first + prev->second.len) {  // already shared
        ref_starts.push_back(prev->first);
        at = prev->first + prev->second.len;
        continue;
      }
    }
    const uint64_t gap_end = it == c->runs.end() ? end : std::min(end, it->first);
    const uint64_t n = gap_end - at;
    const int fd = memfd_create("softmrc-mr", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    bool ok = fd >= 0 && ftruncate(fd, static_cast<off_t>(n)) == 0;
    // The pages' current contents go with them.
    for (uint64_t done = 0; ok && done < n;) {
      // The raw system call: the pages around the MR are copied whole, and a sanitizer's
      // pwrite interceptor would take the bytes outside the buffer for an overflow.
      const ssize_t w = syscall(SYS_pwrite64, fd, reinterpret_cast<const void*>(at + done),
                                n - done, static_cast<off_t>(done));
      ok = w > 0;
      if (ok) done += static_cast<uint64_t>(w);
    }
    ok = ok && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) == 0;
    // The memfd replaces the pages right after the copy, before anything else runs here: the
    // pages around a heap buffer hold the allocator's own data, and an allocation between the
    // copy and the replacement (this function's vectors, the request to the device) would be
    // lost with the old pages (glibc then aborts in malloc). From here the process's pages are
    // the memfd the device maps at the same addresses; if the device refuses the MR they stay
    // the process's memory, file-backed, as after ibv_dereg_mr.
    ok = ok && mmap(reinterpret_cast<void*>(at), n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
                    fd, 0) == reinterpret_cast<void*>(at);
    if (!ok) {
      const int e = errno;
      if (fd >= 0) close(fd);
      for (int f : fds) close(f);
      fds.clear();
      errno = e ? e : ENOMEM;
      return -1;
    }
    new_starts.push_back(at);
    new_lens.push_back(n);
    fds.push_back(fd);
    at = gap_end;
  }
  return 0;
}

void commit_range(Conn* c, const std::vector<uint64_t>& new_starts,
                  const std::vector<uint64_t>& new_lens, const std::vector<int>& fds,
                  const std::vector<uint64_t>& ref_starts, bool registered) {
  std::lock_guard<std::mutex> lk(c->objs_mu);
  for (size_t i = 0; i < new_starts.size(); ++i) {
    // share_range mapped the memfd over the pages already: what one process writes, the other
    // reads.
    if (registered) c->runs[new_starts[i]] = {new_lens[i], 1};
    close(fds[i]);
  }
  if (registered)
    for (uint64_t s : ref_starts) ++c->runs[s].refs;
}

void release_range(Conn* c, const std::vector<uint64_t>& starts) {
  std::lock_guard<std::mutex> lk(c->objs_mu);
  // The pages stay mapped in the process (they are the application's memory); they are just no
  // longer shared with the device process.
  for (uint64_t s : starts) {
    auto it = c->runs.find(s);
    if (it != c->runs.end() && --it->second.refs <= 0) c->runs.erase(it);
  }
}

}  // namespace softmrc::client

namespace softmrc::remote {

using client::Conn;
using client::Reply;
using devproto::Op;
using devproto::Reader;
using devproto::Writer;

namespace {

Writer req(Op op) {
  Writer w;
  w.put<uint32_t>(static_cast<uint32_t>(op));
  return w;
}

// Sends and returns the call's int result with errno set as the device set it.
int call(Conn* c, Writer& w, Reply& rep) {
  if (!client::rpc(c, w, rep)) {
    errno = rep.err ? rep.err : EIO;
    return -1;
  }
  if (rep.rc != 0) errno = rep.err;
  return rep.rc;
}

template <typename T>
T* lookup(Conn* c, uint64_t rid) {
  std::lock_guard<std::mutex> lk(c->objs_mu);
  auto it = c->by_rid.find(rid);
  return it == c->by_rid.end() ? nullptr : static_cast<T*>(it->second);
}

uint64_t rid_of_cq(const mrc_cq* cq) {
  return client::is_remote(cq) ? cq->rid : UINT64_MAX;  // UINT64_MAX: no such handle
}

void close_fds(std::vector<int>& fds) {
  for (int fd : fds) close(fd);
  fds.clear();
}

}  // namespace

mrc_context* create_context(ibv_context* vctx, mrc_context_attr* attr) {
  Conn* c = nullptr;
  const uint64_t vrid = client::vctx_rid(vctx, &c);
  Writer w = req(Op::kCreateContext);
  mrc_context_attr a{};
  if (attr != nullptr) a = *attr;
  w.put<uint64_t>(vrid).put<uint8_t>(attr != nullptr).bytes(&a, sizeof a);
  Reply rep;
  if (call(c, w, rep) != 0 || rep.fds.size() != 1) {
    close_fds(rep.fds);
    if (rep.rc == 0) errno = EPROTO;
    return nullptr;
  }
  Reader r = rep.reader();
  auto* ctx = new mrc_context;
  ctx->vctx = vctx;
  ctx->conn = c;
  ctx->rid = r.get<uint64_t>();
  ctx->api_version = r.get<uint32_t>();
  ctx->async_fd = rep.fds[0];
  std::lock_guard<std::mutex> lk(c->objs_mu);
  c->ctxs.insert(ctx);
  c->by_rid[ctx->rid] = ctx;
  return ctx;
}

// Asks the device to destroy `o`, then forgets its handle (`under_lock` drops what else the
// process keeps about it). A dead device has nothing left to free: the process's side goes and
// the call succeeds. False, with errno set, when a live device refused.
template <typename T, typename F>
bool release_remote(Conn* c, Op op, T* o, std::set<T*>& owned, F&& under_lock) {
  Writer w = req(op);
  w.put<uint64_t>(o->rid);
  Reply rep;
  if (call(c, w, rep) != 0 && !c->dead) return false;
  std::lock_guard<std::mutex> lk(c->objs_mu);
  under_lock();
  owned.erase(o);
  c->by_rid.erase(o->rid);
  return true;
}

int destroy_context(mrc_context* ctx) {
  Conn* c = ctx->conn;
  if (!release_remote(c, Op::kDestroyContext, ctx, c->ctxs, [&] { c->fatal_delivered.erase(ctx); }))
    return -1;
  close(ctx->async_fd);
  delete ctx;
  return 0;
}

int query_device_ex(ibv_context* vctx, mrc_context* ctx, mrc_device_attr* attr, int* supported) {
  Conn* c = nullptr;
  const uint64_t vrid = client::vctx_rid(vctx, &c);
  if (ctx != nullptr && (!client::is_remote(ctx) || ctx->vctx != vctx)) {
    errno = EINVAL;
    return -1;
  }
  Writer w = req(Op::kQueryDeviceEx);
  w.put<uint64_t>(vrid).put<uint64_t>(ctx ? ctx->rid : 0);
  Reply rep;
  const int rc = call(c, w, rep);
  if (rc != 0) return rc;
  Reader r = rep.reader();
  *supported = r.get<int32_t>();
  r.blob(*attr);
  return 0;
}

int create_comp_channel(mrc_context* ctx, mrc_comp_channel** channel) {
  Conn* c = ctx->conn;
  Writer w = req(Op::kCreateCompChannel);
  w.put<uint64_t>(ctx->rid);
  Reply rep;
  if (call(c, w, rep) != 0 || rep.fds.size() != 1) {
    close_fds(rep.fds);
    if (rep.rc == 0) errno = EPROTO;
    return -1;
  }
  auto* ch = new mrc_comp_channel;
  ch->ctx = ctx;
  ch->fd = rep.fds[0];
  ch->rid = rep.reader().get<uint64_t>();
  std::lock_guard<std::mutex> lk(c->objs_mu);
  c->chans.insert(ch);
  c->by_rid[ch->rid] = ch;
  *channel = ch;
  return 0;
}

int destroy_comp_channel(mrc_comp_channel* ch) {
  Conn* c = ch->ctx->conn;
  if (!release_remote(c, Op::kDestroyCompChannel, ch, c->chans, [] {})) return -1;
  close(ch->fd);
  delete ch;
  return 0;
}

mrc_cq* create_cq(mrc_context* ctx, int cqe, void* cq_context, mrc_comp_channel* ch, int vector,
                  bool ev_cq) {
  Conn* c = ctx->conn;
  if (ch != nullptr && (!client::is_remote(ch) || ch->ctx != ctx)) {
    errno = EINVAL;
    return nullptr;
  }
  Writer w = req(ev_cq ? Op::kCtlCreateEvEventCq : Op::kCreateCq);
  w.put<uint64_t>(ctx->rid).put<int32_t>(cqe).put<uint64_t>(ch ? ch->rid : 0).put<int32_t>(vector);
  Reply rep;
  if (call(c, w, rep) != 0) {
    close_fds(rep.fds);
    return nullptr;
  }
  Reader r = rep.reader();
  auto* cq = new mrc_cq;
  cq->ctx = ctx;
  cq->cqe = cqe;
  cq->cq_context = cq_context;
  cq->channel = ch;
  cq->ev_event_cq = ev_cq;
  cq->rid = r.get<uint64_t>();
  const uint32_t slots = r.get<uint32_t>();
  cq->poll_drives = r.get<uint8_t>() != 0;
  // An application CQ comes with its completion ring (cq_ring.h); one the library cannot map
  // as announced is the device's fault, and the CQ is given back.
  const bool want_ring = !ev_cq;
  bool ring_ok = r.ok() && rep.fds.size() == (want_ring ? 1u : 0u) && (slots != 0) == want_ring;
  if (ring_ok && want_ring) {
    cq->ring_rx = std::make_unique<softmrc::cq_ring::Consumer>();
    ring_ok = cq->ring_rx->attach(rep.fds[0], slots);
    rep.fds.clear();
  }
  if (!ring_ok) {
    close_fds(rep.fds);
    Writer d = req(Op::kDestroyCq);
    d.put<uint64_t>(cq->rid);
    Reply drep;
    (void)call(c, d, drep);
    delete cq;
    errno = EPROTO;
    return nullptr;
  }
  std::lock_guard<std::mutex> lk(c->objs_mu);
  if (ch) ++ch->cqs;
  c->cqs.insert(cq);
  c->by_rid[cq->rid] = cq;
  return cq;
}

int poll_cq(mrc_cq* cq, int n, ibv_wc* wc) {
  if (n < 0 || (n > 0 && wc == nullptr) || cq->ev_event_cq) {
    errno = EINVAL;
    return -1;
  }
  Conn* c = cq->ctx->conn;
  if (cq->ring_rx) {
    if (c->dead) {
      errno = EIO;
      return -1;
    }
    if (cq->poll_drives) {
      // A loopback device moves only when asked: the request runs its engine, and what that
      // completes lands in the ring.
      Writer w = req(Op::kPollCq);
      w.put<uint64_t>(cq->rid).put<int32_t>(0);
      Reply rep;
      if (call(c, w, rep) < 0) return -1;
    }
    int got;
    bool yield = false;
    {
      std::lock_guard<std::mutex> lk(cq->mu);
      got = cq->ring_rx->poll(n, wc);
      cq->empty_polls = got == 0 ? cq->empty_polls + 1 : 0;
      // An application spinning on an empty CQ waits for softmrcd, which needs a core: now and
      // then give it ours (a system call every 64 empty polls, not every one).
      yield = got == 0 && cq->empty_polls % 64 == 0;
    }
    if (yield) sched_yield();
    return got;
  }
  Writer w = req(Op::kPollCq);
  w.put<uint64_t>(cq->rid).put<int32_t>(std::min(n, 1024));
  Reply rep;
  const int rc = call(c, w, rep);
  if (rc <= 0) return rc;
  Reader r = rep.reader();
  size_t bytes = 0;
  const uint8_t* p = r.bytes(bytes);
  if (p == nullptr || bytes != static_cast<size_t>(rc) * sizeof(ibv_wc) || rc > n) {
    errno = EPROTO;
    return -1;
  }
  std::memcpy(wc, p, bytes);
  return rc;
}

int destroy_cq(mrc_cq* cq) {
  Conn* c = cq->ctx->conn;
  {
    // Every event handed out must have been acknowledged (ibv_destroy_cq's rule).
    std::unique_lock<std::mutex> lk(cq->mu);
    cq->acked_cv.wait(
        lk, [&] { return c->dead || cq->events_acked.load() >= cq->events_delivered.load(); });
  }
  if (!release_remote(c, Op::kDestroyCq, cq, c->cqs, [&] {
        if (cq->channel) --cq->channel->cqs;
      }))
    return -1;
  delete cq;
  return 0;
}

int req_notify_cq(mrc_cq* cq, int solicited_only) {
  Writer w = req(Op::kReqNotifyCq);
  w.put<uint64_t>(cq->rid).put<int32_t>(solicited_only);
  Reply rep;
  return call(cq->ctx->conn, w, rep);
}

int get_cq_event(mrc_comp_channel* ch, mrc_cq** cq, void** cq_context) {
  Conn* c = ch->ctx->conn;
  const bool nonblocking = (fcntl(ch->fd, F_GETFL) & O_NONBLOCK) != 0;
  for (;;) {
    if (c->dead) {
      errno = EIO;
      return -1;
    }
    pollfd p{ch->fd, POLLIN, 0};
    const int pr = poll(&p, 1, nonblocking ? 0 : -1);
    if (pr < 0 && errno == EINTR) continue;
    if (pr == 0) {
      errno = EAGAIN;
      return -1;
    }
    if (c->dead) {
      errno = EIO;
      return -1;
    }
    Writer w = req(Op::kGetCqEvent);
    w.put<uint64_t>(ch->rid);
    Reply rep;
    if (call(c, w, rep) != 0) {
      if (errno == EAGAIN && !nonblocking) continue;  // another thread took it
      return -1;
    }
    mrc_cq* got = lookup<mrc_cq>(c, rep.reader().get<uint64_t>());
    if (got == nullptr) {
      errno = EAGAIN;  // the CQ went away
      return -1;
    }
    got->events_delivered.fetch_add(1);
    *cq = got;
    *cq_context = got->cq_context;
    return 0;
  }
}

void ack_cq_events(mrc_cq* cq, unsigned n) {
  {
    std::lock_guard<std::mutex> lk(cq->mu);
    cq->events_acked.fetch_add(n);
    cq->acked_cv.notify_all();
  }
  Writer w = req(Op::kAckCqEvents);
  w.put<uint64_t>(cq->rid).put<uint32_t>(n);
  Reply rep;
  (void)call(cq->ctx->conn, w, rep);
}

mrc_qp_hint* create_qp_hint(mrc_context* ctx, mrc_qp_hint_init_attr* a) {
  if (a == nullptr) {
    errno = EINVAL;
    return nullptr;
  }
  Conn* c = ctx->conn;
  Writer w = req(Op::kCreateQpHint);
  w.put<uint64_t>(ctx->rid).bytes(a, sizeof *a);
  Reply rep;
  if (call(c, w, rep) != 0) return nullptr;
  auto* h = new mrc_qp_hint;
  h->ctx = ctx;
  h->attr = a->attr;
  h->rid = rep.reader().get<uint64_t>();
  std::lock_guard<std::mutex> lk(c->objs_mu);
  c->hints.insert(h);
  c->by_rid[h->rid] = h;
  return h;
}

int destroy_qp_hint(mrc_qp_hint* h) {
  Conn* c = h->ctx->conn;
  if (!release_remote(c, Op::kDestroyQpHint, h, c->hints, [] {})) return -1;
  delete h;
  return 0;
}

int query_qp_hint(mrc_qp_hint* h, mrc_qp_hint_attr* a, int mask, bool modify) {
  if (a == nullptr) {
    errno = EINVAL;
    return -1;
  }
  Writer w = req(modify ? Op::kModifyQpHint : Op::kQueryQpHint);
  w.put<uint64_t>(h->rid).bytes(a, sizeof *a).put<int32_t>(mask);
  Reply rep;
  const int rc = call(h->ctx->conn, w, rep);
  if (rc == 0 && !modify) rep.reader().blob(*a);
  return rc;
}

mrc_qp* create_qp(mrc_context* ctx, mrc_qp_init_attr* a) {
  if (a == nullptr) {
    errno = EINVAL;
    return nullptr;
  }
  Conn* c = ctx->conn;
  const uint64_t pd = client::pd_rid(a->pd);
  Writer w = req(Op::kCreateQp);
  w.put<uint64_t>(ctx->rid).bytes(a, sizeof *a);
  w.put<uint64_t>(rid_of_cq(a->send_cq)).put<uint64_t>(rid_of_cq(a->recv_cq));
  w.put<uint64_t>(pd ? pd : UINT64_MAX);
  Reply rep;
  if (call(c, w, rep) != 0) return nullptr;
  Reader r = rep.reader();
  auto* qp = new mrc_qp;
  qp->ctx = ctx;
  qp->init = *a;
  qp->rid = r.get<uint64_t>();
  qp->qpn = r.get<uint32_t>();
  std::lock_guard<std::mutex> lk(c->objs_mu);
  c->qps.insert(qp);
  c->by_rid[qp->rid] = qp;
  return qp;
}

int destroy_qp(mrc_qp* qp) {
  Conn* c = qp->ctx->conn;
  if (!release_remote(c, Op::kDestroyQp, qp, c->qps, [] {})) return -1;
  delete qp;
  return 0;
}

int modify_qp(mrc_qp* qp, ibv_qp_attr* v, int vmask, mrc_qp_attr* m, int mmask) {
  ibv_qp_attr vv{};
  mrc_qp_attr mm{};
  if (v) vv = *v;
  if (m) mm = *m;
  uint64_t hint = 0;
  if (m != nullptr && m->qp_hint != nullptr)
    hint = client::is_remote(m->qp_hint) ? m->qp_hint->rid : UINT64_MAX;
  mm.qp_hint = nullptr;
  Writer w = req(Op::kModifyQp);
  w.put<uint64_t>(qp->rid).put<uint8_t>(v != nullptr).bytes(&vv, sizeof vv).put<int32_t>(vmask);
  w.put<uint8_t>(m != nullptr).bytes(&mm, sizeof mm).put<uint64_t>(hint).put<int32_t>(mmask);
  Reply rep;
  return call(qp->ctx->conn, w, rep);
}

int query_qp(mrc_qp* qp, ibv_qp_attr* v, int vmask, mrc_qp_attr* m, int mmask,
             mrc_qp_init_attr* init) {
  Conn* c = qp->ctx->conn;
  Writer w = req(Op::kQueryQp);
  w.put<uint64_t>(qp->rid).put<int32_t>(vmask).put<int32_t>(mmask).put<uint8_t>(init != nullptr);
  Reply rep;
  const int rc = call(c, w, rep);
  if (rc != 0) return rc;
  Reader r = rep.reader();
  ibv_qp_attr vv{};
  mrc_qp_attr mm{};
  mrc_qp_init_attr ii{};
  r.blob(vv);
  r.blob(mm);
  const uint64_t hint = r.get<uint64_t>();
  r.blob(ii);
  if (!r.ok()) {
    errno = EPROTO;
    return -1;
  }
  mm.qp_hint = hint ? lookup<mrc_qp_hint>(c, hint) : nullptr;
  if (v) *v = vv;
  if (m) *m = mm;
  if (init) {
    // The pointers are the process's own objects, as it created the QP with them.
    ii.qp_context = qp->init.qp_context;
    ii.send_cq = qp->init.send_cq;
    ii.recv_cq = qp->init.recv_cq;
    ii.pd = qp->init.pd;
    *init = ii;
  }
  return 0;
}

int post_send(mrc_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr) {
  Writer w = req(Op::kPostSend);
  uint32_t n = 0;
  for (ibv_send_wr* x = wr; x != nullptr; x = x->next) ++n;
  w.put<uint64_t>(qp->rid).put<uint32_t>(n);
  for (ibv_send_wr* x = wr; x != nullptr; x = x->next) {
    const uint32_t nsge = x->num_sge > 0 && x->sg_list != nullptr ? x->num_sge : 0;
    w.put<uint64_t>(x->wr_id).put<uint32_t>(x->opcode).put<uint32_t>(x->send_flags);
    w.put<uint32_t>(x->imm_data).put<uint64_t>(x->wr.rdma.remote_addr);
    w.put<uint32_t>(x->wr.rdma.rkey).put<uint32_t>(x->num_sge < 0 ? 65 : nsge);
    for (uint32_t k = 0; k < nsge && k <= 64; ++k)
      w.put<uint64_t>(x->sg_list[k].addr)
          .put<uint32_t>(x->sg_list[k].length)
          .put<uint32_t>(x->sg_list[k].lkey);
  }
  Reply rep;
  if (!client::rpc(qp->ctx->conn, w, rep)) {
    if (bad_wr) *bad_wr = wr;
    errno = EIO;
    return EIO;
  }
  if (rep.rc == 0) return 0;
  uint32_t idx = rep.reader().get<uint32_t>();
  ibv_send_wr* b = wr;
  while (idx-- > 0 && b != nullptr && b->next != nullptr) b = b->next;
  if (bad_wr) *bad_wr = b;
  errno = rep.rc;
  return rep.rc;
}

int post_recv(mrc_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  Writer w = req(Op::kPostRecv);
  uint32_t n = 0;
  for (ibv_recv_wr* x = wr; x != nullptr; x = x->next) ++n;
  w.put<uint64_t>(qp->rid).put<uint32_t>(n);
  for (ibv_recv_wr* x = wr; x != nullptr; x = x->next) {
    const uint32_t nsge = x->num_sge > 0 && x->sg_list != nullptr ? x->num_sge : 0;
    w.put<uint64_t>(x->wr_id).put<uint32_t>(x->num_sge < 0 ? 65 : nsge);
    for (uint32_t k = 0; k < nsge && k <= 64; ++k)
      w.put<uint64_t>(x->sg_list[k].addr)
          .put<uint32_t>(x->sg_list[k].length)
          .put<uint32_t>(x->sg_list[k].lkey);
  }
  Reply rep;
  if (!client::rpc(qp->ctx->conn, w, rep)) {
    if (bad_wr) *bad_wr = wr;
    errno = EIO;
    return EIO;
  }
  if (rep.rc == 0) return 0;
  uint32_t idx = rep.reader().get<uint32_t>();
  ibv_recv_wr* b = wr;
  while (idx-- > 0 && b != nullptr && b->next != nullptr) b = b->next;
  if (bad_wr) *bad_wr = b;
  errno = rep.rc;
  return rep.rc;
}

int get_async_event(mrc_context* ctx, mrc_async_event* ev) {
  Conn* c = ctx->conn;
  for (;;) {
    if (c->dead) {
      // The device process is gone: one IBV_EVENT_DEVICE_FATAL per context, then errors.
      std::lock_guard<std::mutex> lk(c->objs_mu);
      if (c->fatal_delivered.insert(ctx).second) {
        *ev = mrc_async_event{};
        ev->event_type = IBV_EVENT_DEVICE_FATAL;
        return 0;
      }
      errno = EIO;
      return -1;
    }
    pollfd p{ctx->async_fd, POLLIN, 0};
    if (poll(&p, 1, -1) < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (c->dead) continue;
    Writer w = req(Op::kGetAsyncEvent);
    w.put<uint64_t>(ctx->rid);
    Reply rep;
    if (call(c, w, rep) != 0) {
      if (errno == EAGAIN || c->dead) continue;
      return -1;
    }
    Reader r = rep.reader();
    *ev = mrc_async_event{};
    ev->event_type = static_cast<ibv_event_type>(r.get<uint32_t>());
    const uint64_t element = r.get<uint64_t>();
    switch (ev->event_type) {
      case IBV_EVENT_QP_FATAL:
      case IBV_EVENT_QP_REQ_ERR:
      case IBV_EVENT_QP_ACCESS_ERR:
        ev->element.qp = lookup<mrc_qp>(c, element);
        break;
      case IBV_EVENT_CQ_ERR:
        ev->element.cq = lookup<mrc_cq>(c, element);
        break;
      default:
        ev->element.port_num = static_cast<int>(element);
        break;
    }
    return 0;
  }
}

int ctl_query_device_ex(ibv_context* vctx, mrc_context* ctx, mrc_ctl_device_attr* a, int* supported,
                        const char** algorithms) {
  Conn* c = nullptr;
  const uint64_t vrid = client::vctx_rid(vctx, &c);
  if (ctx != nullptr && (!client::is_remote(ctx) || ctx->vctx != vctx)) {
    errno = EINVAL;
    return -1;
  }
  Writer w = req(Op::kCtlQueryDeviceEx);
  w.put<uint64_t>(vrid).put<uint64_t>(ctx ? ctx->rid : 0);
  Reply rep;
  const int rc = call(c, w, rep);
  if (rc != 0) return rc;
  Reader r = rep.reader();
  const int32_t sup = r.get<int32_t>();
  if (supported) *supported = sup;
  r.blob(*a);
  a->cc.algorithms = algorithms;
  return 0;
}

int ctl_port(mrc_context* ctx, uint8_t port, mrc_ctl_port_attr* a, int mask, bool modify) {
  if (a == nullptr) {
    errno = EINVAL;
    return -1;
  }
  Writer w = req(modify ? Op::kCtlModifyPort : Op::kCtlQueryPort);
  w.put<uint64_t>(ctx->rid).put<uint8_t>(port).bytes(a, sizeof *a).put<int32_t>(mask);
  Reply rep;
  const int rc = call(ctx->conn, w, rep);
  if (rc == 0 && !modify) rep.reader().blob(*a);
  return rc;
}

namespace {

// An application array the call reads and may write back: at most `count` entries of it.
template <typename T>
size_t array_bytes(const T* p, int count) {
  if (p == nullptr || count <= 0) return 0;
  return static_cast<size_t>(std::min(count, 1 << 16)) * sizeof(T);
}

template <typename T>
void copy_back(T* to, int count, Reader& r) {
  size_t n = 0;
  const uint8_t* b = r.bytes(n);
  if (to == nullptr || b == nullptr) return;
  std::memcpy(to, b, std::min(n, array_bytes(to, count)));
}

}  // namespace

int ctl_ev_fmt_profile(mrc_context* ctx, uint64_t id, mrc_ctl_ev_fmt_profile_attr* a, int mask,
                       bool modify) {
  if (a == nullptr) {
    errno = EINVAL;
    return -1;
  }
  auto* fields = a->ev_fmt_op.fmt_fields;
  const int count = a->ev_fmt_op.fmt_field_count;
  Writer w = req(modify ? Op::kCtlModifyEvFmtProfile : Op::kCtlQueryEvFmtProfile);
  w.put<uint64_t>(ctx->rid).put<uint64_t>(id).bytes(a, sizeof *a).put<int32_t>(mask);
  w.put<uint8_t>(fields != nullptr).bytes(fields, array_bytes(fields, count));
  Reply rep;
  const int rc = call(ctx->conn, w, rep);
  if (rep.buf.size() <= rep.off) return rc;
  Reader r = rep.reader();
  mrc_ctl_ev_fmt_profile_attr out{};
  if (!r.blob(out)) return rc;
  out.ev_fmt_op.fmt_fields = fields;
  *a = out;
  copy_back(fields, count, r);
  return rc;
}

int ctl_ev_profile(mrc_context* ctx, uint64_t id, mrc_ctl_ev_profile_attr* a, int mask,
                   bool modify) {
  if (a == nullptr) {
    errno = EINVAL;
    return -1;
  }
  auto* entries = a->ev_op.entries;
  const int ecount = a->ev_op.entry_count;
  auto* fields = a->ev_fields_op.fields;
  const int fcount = a->ev_fields_op.field_count;
  Writer w = req(modify ? Op::kCtlModifyEvProfile : Op::kCtlQueryEvProfile);
  w.put<uint64_t>(ctx->rid).put<uint64_t>(id).bytes(a, sizeof *a).put<int32_t>(mask);
  w.put<uint8_t>(entries != nullptr).bytes(entries, array_bytes(entries, ecount));
  w.put<uint8_t>(fields != nullptr).bytes(fields, array_bytes(fields, fcount));
  Reply rep;
  const int rc = call(ctx->conn, w, rep);
  if (rep.buf.size() <= rep.off) return rc;
  Reader r = rep.reader();
  mrc_ctl_ev_profile_attr out{};
  if (!r.blob(out)) return rc;
  out.ev_op.entries = entries;
  out.ev_fields_op.fields = fields;
  *a = out;
  copy_back(entries, ecount, r);
  copy_back(fields, fcount, r);
  return rc;
}

int ctl_cc_profile(mrc_context* ctx, uint64_t id, mrc_ctl_cc_profile_attr* a, int mask, bool modify,
                   const char* const* algorithms) {
  if (a == nullptr) {
    errno = EINVAL;
    return -1;
  }
  mrc_ctl_cc_nscc_cfg cfg{};
  if (modify && a->cc_config != nullptr) std::memcpy(&cfg, a->cc_config, sizeof cfg);
  const char* alg = modify ? a->algorithm : nullptr;
  mrc_ctl_cc_profile_attr flat = *a;
  flat.algorithm = nullptr;
  flat.cc_config = nullptr;
  Writer w = req(modify ? Op::kCtlModifyCcProfile : Op::kCtlQueryCcProfile);
  w.put<uint64_t>(ctx->rid).put<uint64_t>(id).bytes(&flat, sizeof flat).put<int32_t>(mask);
  w.put<uint8_t>(alg != nullptr).bytes(alg, alg ? std::min<size_t>(std::strlen(alg), 255) : 0);
  w.put<uint8_t>(modify && a->cc_config != nullptr).bytes(&cfg, sizeof cfg);
  Reply rep;
  const int rc = call(ctx->conn, w, rep);
  if (rc != 0 || modify) return rc;
  Reader r = rep.reader();
  mrc_ctl_cc_profile_attr out{};
  r.blob(out);
  const uint8_t has_alg = r.get<uint8_t>();
  size_t alen = 0;
  const uint8_t* ab = r.bytes(alen, 256);
  const uint8_t has_cfg = r.get<uint8_t>();
  r.blob(cfg);
  if (!r.ok()) {
    errno = EPROTO;
    return -1;
  }
  out.algorithm = nullptr;
  if (has_alg)
    for (const char* const* p = algorithms; *p != nullptr; ++p)
      if (std::strlen(*p) == alen && std::memcmp(*p, ab, alen) == 0) out.algorithm = *p;
  out.cc_config = nullptr;
  if (has_cfg) {
    std::lock_guard<std::mutex> lk(ctx->conn->objs_mu);
    out.cc_config = &(ctx->cc_cfgs[id] = cfg);
  }
  *a = out;
  return 0;
}

int ctl_poll_ev_event(mrc_cq* cq, int n, mrc_ctl_ev_event* out) {
  if (n < 0 || (n > 0 && out == nullptr)) return -EINVAL;
  Writer w = req(Op::kCtlPollEvEvent);
  w.put<uint64_t>(cq->rid).put<int32_t>(std::min(n, 1024));
  Reply rep;
  if (!client::rpc(cq->ctx->conn, w, rep)) return -EIO;
  if (rep.rc <= 0) return rep.rc;
  Reader r = rep.reader();
  size_t bytes = 0;
  const uint8_t* p = r.bytes(bytes);
  if (p == nullptr || rep.rc > n || bytes > static_cast<size_t>(n) * sizeof(mrc_ctl_ev_event))
    return -EPROTO;
  std::memcpy(out, p, bytes);
  return rep.rc;
}

int ctl_ep_batch_send_wait(mrc_context* ctx, uint8_t tc, mrc_ctl_ep_op_type op,
                           mrc_ctl_ep_req* req_, int num_req, uint32_t timeout, mrc_ctl_ep_rsp* rsp,
                           int* num_rsp) {
  if (req_ == nullptr || rsp == nullptr || num_rsp == nullptr || num_req <= 0 ||
      num_req > (1 << 14)) {
    errno = EINVAL;
    return -1;
  }
  *num_rsp = 0;
  uint32_t optype;
  std::memcpy(&optype, &op, sizeof optype);
  Writer w = req(Op::kCtlEpBatchSendWait);
  w.put<uint64_t>(ctx->rid).put<uint8_t>(tc).put<uint32_t>(optype);
  w.bytes(req_, static_cast<size_t>(num_req) * sizeof(mrc_ctl_ep_req)).put<uint32_t>(timeout);
  Reply rep;
  const int rc = call(ctx->conn, w, rep);
  if (rep.buf.size() <= rep.off) return rc;
  Reader r = rep.reader();
  const int32_t got = r.get<int32_t>();
  size_t bytes = 0;
  const uint8_t* p = r.bytes(bytes);
  if (p != nullptr && got >= 0 && got <= num_req &&
      bytes == static_cast<size_t>(got) * sizeof(mrc_ctl_ep_rsp)) {
    std::memcpy(rsp, p, bytes);
    *num_rsp = got;
  }
  return rc;
}

}  // namespace softmrc::remote
