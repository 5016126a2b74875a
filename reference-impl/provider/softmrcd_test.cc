// softmrcd, the per-node device process: isolation between the processes that share it, the
// peer's privileges, and the death of an application or of the device process. Each test
// starts its own softmrcd (loopback I/O: no wire, no namespace) on a private socket.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "mrc.h"
#include "mrc_ctl.h"
#include "reference-impl/provider/cq_ring.h"
#include "reference-impl/provider/devproto.h"

namespace {

using softmrc::devproto::Op;
using softmrc::devproto::Reader;
using softmrc::devproto::Writer;

// A softmrcd of the test's own, killed at the end.
class Daemon {
 public:
  Daemon() {
    char tmpl[] = "/tmp/softmrcd-test-XXXXXX";
    dir_ = mkdtemp(tmpl);
    path_ = dir_ + "/dev.sock";
    const char* bin = std::getenv("SOFTMRCD");
    pid_ = fork();
    if (pid_ == 0) {
      setenv("MRC_SOFT_IO", "loopback", 1);
      execl(bin ? bin : SOFTMRCD_BIN, "softmrcd", "--socket", path_.c_str(), nullptr);
      _exit(127);
    }
    for (int i = 0; i < 200 && access(path_.c_str(), F_OK) != 0; ++i) usleep(20000);
  }
  ~Daemon() {
    kill_now();
    unlink(path_.c_str());
    rmdir(dir_.c_str());
  }
  void kill_now() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      pid_ = 0;
    }
  }
  const std::string& path() const { return path_; }
  pid_t pid() const { return pid_; }
  // Mappings of applications' memory in the device process.
  int shared_mappings() const {
    std::ifstream f("/proc/" + std::to_string(pid_) + "/maps");
    std::string line;
    int n = 0;
    while (std::getline(f, line)) n += line.find("softmrc-mr") != std::string::npos;
    return n;
  }

 private:
  std::string dir_, path_;
  pid_t pid_ = 0;
};

struct Rsp {
  int32_t rc = -1, err = 0;
  std::vector<uint8_t> buf;
  std::vector<int> fds;
  Reader reader() const { return {buf.data() + 8, buf.size() - 8}; }
  uint64_t id() const { return reader().get<uint64_t>(); }
};

// A connection that speaks the protocol by hand, as a hostile process could.
class Raw {
 public:
  explicit Raw(const std::string& path) {
    fd_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::strcpy(sa.sun_path, path.c_str());
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
  }
  ~Raw() { close(fd_); }
  bool connected() const { return connected_; }
  Rsp call(Writer w, const std::vector<int>& fds = {}) {
    Rsp r;
    if (!softmrc::devproto::send_msg(fd_, w.buf(), fds)) return r;
    std::vector<uint8_t> buf;
    const ssize_t n = softmrc::devproto::recv_msg(fd_, buf, r.fds);
    if (n < 8) return r;
    r.buf.assign(buf.begin(), buf.begin() + n);
    Reader rd(r.buf.data(), r.buf.size());
    r.rc = rd.get<int32_t>();
    r.err = rd.get<int32_t>();
    for (int fd : r.fds) close(fd);
    return r;
  }
  static Writer op(Op o) {
    Writer w;
    w.put<uint32_t>(static_cast<uint32_t>(o));
    return w;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

// The objects one application has: verbs context, PD, MRC context, CQ, QP.
struct Objects {
  uint64_t vctx = 0, pd = 0, ctx = 0, cq = 0, qp = 0;
};

Objects make_objects(Raw& c) {
  Objects o;
  EXPECT_EQ(c.call(Raw::op(Op::kHello).put<uint32_t>(softmrc::devproto::kVersion)).rc, 0);
  Rsp r = c.call(Raw::op(Op::kOpenDevice));
  EXPECT_EQ(r.rc, 0);
  o.vctx = r.id();
  r = c.call(Raw::op(Op::kAllocPd).put<uint64_t>(o.vctx));
  EXPECT_EQ(r.rc, 0);
  o.pd = r.id();
  mrc_context_attr ca{};
  r = c.call(
      Raw::op(Op::kCreateContext).put<uint64_t>(o.vctx).put<uint8_t>(0).bytes(&ca, sizeof ca));
  EXPECT_EQ(r.rc, 0);
  o.ctx = r.id();
  r = c.call(Raw::op(Op::kCreateCq)
                 .put<uint64_t>(o.ctx)
                 .put<int32_t>(16)
                 .put<uint64_t>(0)
                 .put<int32_t>(0));
  EXPECT_EQ(r.rc, 0);
  o.cq = r.id();
  mrc_qp_init_attr qa{};
  qa.cap.max_send_wr = 4;
  qa.cap.max_recv_wr = 4;
  r = c.call(Raw::op(Op::kCreateQp)
                 .put<uint64_t>(o.ctx)
                 .bytes(&qa, sizeof qa)
                 .put<uint64_t>(o.cq)
                 .put<uint64_t>(o.cq)
                 .put<uint64_t>(o.pd));
  EXPECT_EQ(r.rc, 0) << "errno " << r.err;
  o.qp = r.id();
  return o;
}

TEST(Softmrcd, NoProcessCanNameAnotherProcesssObjects) {
  Daemon d;
  Raw a(d.path()), b(d.path());
  ASSERT_TRUE(a.connected() && b.connected());
  const Objects oa = make_objects(a);
  ASSERT_NE(oa.qp, 0u);
  ASSERT_EQ(b.call(Raw::op(Op::kHello).put<uint32_t>(softmrc::devproto::kVersion)).rc, 0);
  // Every handle of A is unknown on B's connection, whatever B does with it.
  Rsp r = b.call(Raw::op(Op::kPollCq).put<uint64_t>(oa.cq).put<int32_t>(4));
  EXPECT_EQ(r.rc, -1);
  EXPECT_EQ(r.err, EINVAL);
  r = b.call(Raw::op(Op::kDestroyQp).put<uint64_t>(oa.qp));
  EXPECT_EQ(r.err, EINVAL);
  r = b.call(Raw::op(Op::kDestroyCq).put<uint64_t>(oa.cq));
  EXPECT_EQ(r.err, EINVAL);
  r = b.call(Raw::op(Op::kAllocPd).put<uint64_t>(oa.vctx));
  EXPECT_EQ(r.err, EINVAL);
  r = b.call(Raw::op(Op::kQueryQp)
                 .put<uint64_t>(oa.qp)
                 .put<int32_t>(IBV_QP_STATE)
                 .put<int32_t>(0)
                 .put<uint8_t>(0));
  EXPECT_EQ(r.err, EINVAL);
  // B's own QP may not name A's CQs or PD either.
  Rsp v = b.call(Raw::op(Op::kOpenDevice));
  Rsp c = b.call(
      Raw::op(Op::kCreateContext)
          .put<uint64_t>(v.id())
          .put<uint8_t>(0)
          .bytes(std::vector<uint8_t>(sizeof(mrc_context_attr)).data(), sizeof(mrc_context_attr)));
  ASSERT_EQ(c.rc, 0);
  mrc_qp_init_attr qa{};
  r = b.call(Raw::op(Op::kCreateQp)
                 .put<uint64_t>(c.id())
                 .bytes(&qa, sizeof qa)
                 .put<uint64_t>(oa.cq)
                 .put<uint64_t>(oa.cq)
                 .put<uint64_t>(oa.pd));
  EXPECT_EQ(r.err, EINVAL);
  // A still has all of them.
  r = a.call(Raw::op(Op::kPollCq).put<uint64_t>(oa.cq).put<int32_t>(4));
  EXPECT_EQ(r.rc, 0);
  r = a.call(Raw::op(Op::kDestroyQp).put<uint64_t>(oa.qp));
  EXPECT_EQ(r.rc, 0);
}

// A memfd of `len` bytes, sealed against shrinking unless told otherwise.
int make_memfd(size_t len, bool seal) {
  const int fd = memfd_create("softmrc-mr", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  EXPECT_EQ(ftruncate(fd, static_cast<off_t>(len)), 0);
  if (seal) {
    EXPECT_EQ(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
  }
  return fd;
}

Writer reg_mr(uint64_t pd, uint64_t addr, uint64_t len, uint32_t nnew, uint64_t run_start,
              uint64_t run_len) {
  Writer w = Raw::op(Op::kRegMr);
  w.put<uint64_t>(pd).put<uint64_t>(addr).put<uint64_t>(len).put<uint32_t>(IBV_ACCESS_LOCAL_WRITE |
                                                                           IBV_ACCESS_REMOTE_WRITE);
  w.put<uint32_t>(nnew);
  if (nnew) w.put<uint64_t>(run_start).put<uint64_t>(run_len);
  w.put<uint32_t>(0);
  return w;
}

TEST(Softmrcd, AnMrReachesOnlyTheProcesssOwnSharedPages) {
  Daemon d;
  Raw a(d.path()), b(d.path());
  const Objects oa = make_objects(a);
  const Objects ob = make_objects(b);
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  // Some address range far from anything: A shares it.
  const uint64_t at = 0x5a5a00000000ull;
  int fd = make_memfd(4 * page, true);
  Rsp r = a.call(reg_mr(oa.pd, at + 16, 100, 1, at, 4 * page), {fd});
  close(fd);
  ASSERT_EQ(r.rc, 0) << "errno " << r.err;
  EXPECT_EQ(d.shared_mappings(), 1);
  // B claims the same addresses (A's pages in the device): refused, nothing mapped.
  fd = make_memfd(4 * page, true);
  r = b.call(reg_mr(ob.pd, at, page, 1, at, 4 * page), {fd});
  close(fd);
  EXPECT_EQ(r.rc, -1);
  EXPECT_EQ(r.err, EADDRINUSE);
  // B registers addresses it shared no pages for (device memory, or A's): refused.
  r = b.call(reg_mr(ob.pd, at, page, 0, 0, 0));
  EXPECT_EQ(r.err, EADDRINUSE);
  r = b.call(reg_mr(ob.pd, reinterpret_cast<uint64_t>(&r), 8, 0, 0, 0));
  EXPECT_EQ(r.err, EADDRINUSE);
  // An MR longer than the pages shared with it: refused.
  fd = make_memfd(page, true);
  r = b.call(reg_mr(ob.pd, at + 64 * page, 2 * page, 1, at + 64 * page, page), {fd});
  close(fd);
  EXPECT_EQ(r.err, EADDRINUSE);
  // A memfd that could shrink under the device: refused.
  fd = make_memfd(page, false);
  r = b.call(reg_mr(ob.pd, at + 128 * page, 8, 1, at + 128 * page, page), {fd});
  close(fd);
  EXPECT_EQ(r.err, EINVAL);
  EXPECT_EQ(d.shared_mappings(), 1);
}

// CAP_NET_ADMIN off in this process's effective set.
bool drop_cap_net_admin() {
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (syscall(SYS_capget, &hdr, data) != 0) return false;
  data[CAP_NET_ADMIN / 32].effective &= ~(1u << (CAP_NET_ADMIN % 32));
  return syscall(SYS_capset, &hdr, data) == 0;
}

TEST(Softmrcd, ControllerCallsAreJudgedByThePeersCapabilities) {
  Daemon d;
  auto try_ctl = [&](bool drop) {
    const pid_t child = fork();
    if (child == 0) {
      if (drop && !drop_cap_net_admin()) _exit(3);
      Raw c(d.path());
      Objects o = make_objects(c);
      mrc_ctl_cc_profile_attr a{};
      a.profile_state = MRC_CTL_PROFILE_OFFLINE;
      Writer w = Raw::op(Op::kCtlModifyCcProfile);
      w.put<uint64_t>(o.ctx).put<uint64_t>(5).bytes(&a, sizeof a);
      w.put<int32_t>(MRC_CTL_CC_PROFILE_STATE | MRC_CTL_CC_PROFILE_ALGORITHM);
      w.put<uint8_t>(1).bytes("uet-1.0-nscc", 12).put<uint8_t>(0);
      mrc_ctl_cc_nscc_cfg cfg{};
      w.bytes(&cfg, sizeof cfg);
      Rsp r = c.call(w);
      _exit(r.rc == 0 ? 0 : r.err == EPERM ? 1 : 2);
    }
    int st = 0;
    waitpid(child, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  };
  if (geteuid() != 0) GTEST_SKIP() << "needs root (the test drops a capability it must have)";
  EXPECT_EQ(try_ctl(false), 0);  // with CAP_NET_ADMIN: done
  EXPECT_EQ(try_ctl(true), 1);   // without: EPERM from the device
}

// An application through lib_mrc.so in device mode, in a child process: its objects, then it
// waits to be killed.
[[noreturn]] void application(const std::string& path, int ready_fd) {
  setenv("MRC_SOFT_DEVICE", path.c_str(), 1);
  ibv_device** list = ibv_get_device_list(nullptr);
  ibv_context* v = list ? ibv_open_device(list[0]) : nullptr;
  if (v == nullptr) _exit(10);
  ibv_pd* pd = ibv_alloc_pd(v);
  static char buf[1 << 20];
  ibv_mr* mr =
      pd ? ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)
         : nullptr;
  mrc_context* ctx = mrc_create_context(v, nullptr);
  mrc_cq* cq = ctx ? mrc_create_cq(ctx, 16, nullptr, nullptr, 0) : nullptr;
  mrc_qp_init_attr qa{};
  qa.send_cq = qa.recv_cq = cq;
  qa.pd = pd;
  mrc_qp* qp = cq ? mrc_create_qp(ctx, &qa) : nullptr;
  const char ok = mr != nullptr && qp != nullptr ? 1 : 0;
  (void)!write(ready_fd, &ok, 1);
  pause();
  _exit(0);
}

TEST(Softmrcd, ADeadApplicationsObjectsAreTornDown) {
  Daemon d;
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  const pid_t app = fork();
  if (app == 0) application(d.path(), p[1]);
  char ok = 0;
  ASSERT_EQ(read(p[0], &ok, 1), 1);
  ASSERT_EQ(ok, 1);
  EXPECT_EQ(d.shared_mappings(), 1);  // its MR's pages, mapped in the device
  kill(app, SIGKILL);
  waitpid(app, nullptr, 0);
  int left = -1;
  for (int i = 0; i < 100 && (left = d.shared_mappings()) != 0; ++i) usleep(20000);
  EXPECT_EQ(left, 0);
  // The device serves the next application as before.
  Raw c(d.path());
  EXPECT_NE(make_objects(c).qp, 0u);
  close(p[0]);
  close(p[1]);
}

// An application that scribbles over its CQ's completion ring (cq_ring.h), here by claiming
// to have consumed more than the device produced: the device stops filling that ring and
// reports a CQ error; it neither writes outside the ring nor dies, and the application's own
// poll does not believe the ring either.
TEST(Softmrcd, ACompletionRingTheApplicationCorruptsIsACqErrorNotACrash) {
  Daemon d;
  const pid_t app = fork();
  if (app == 0) {
    alarm(30);
    setenv("MRC_SOFT_DEVICE", d.path().c_str(), 1);
    ibv_device** list = ibv_get_device_list(nullptr);
    ibv_context* v = list ? ibv_open_device(list[0]) : nullptr;
    mrc_context* ctx = v ? mrc_create_context(v, nullptr) : nullptr;
    ibv_pd* pd = v ? ibv_alloc_pd(v) : nullptr;
    mrc_cq* cq = ctx ? mrc_create_cq(ctx, 16, nullptr, nullptr, 0) : nullptr;
    if (cq == nullptr || pd == nullptr) _exit(10);
    static char buf[8192] __attribute__((aligned(4096)));
    ibv_mr* mr = ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    if (mr == nullptr) _exit(11);
    mrc_qp* qp[2];
    uint32_t qpn[2];
    for (int i = 0; i < 2; ++i) {
      mrc_qp_init_attr qa{};
      qa.send_cq = qa.recv_cq = cq;
      qa.pd = pd;
      qa.cap.max_send_wr = 16;
      qa.cap.max_recv_wr = 4;
      qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
      qa.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE;
      qp[i] = mrc_create_qp(ctx, &qa);
      if (qp[i] == nullptr || mrc_get_qpn(qp[i], &qpn[i]) != 0) _exit(12);
      ibv_qp_attr a{};
      a.qp_state = IBV_QPS_INIT;
      a.port_num = 1;
      a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
      if (mrc_modify_qp(qp[i], &a, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS, nullptr, 0)) _exit(13);
    }
    for (int i = 0; i < 2; ++i) {
      ibv_qp_attr a{};
      a.qp_state = IBV_QPS_RTR;
      a.path_mtu = IBV_MTU_1024;
      a.ah_attr.is_global = 1;
      a.ah_attr.port_num = 1;
      a.ah_attr.grh.sgid_index = 3;
      if (ibv_query_gid(v, 1, 3, &a.ah_attr.grh.dgid) != 0) _exit(14);  // the node itself
      a.dest_qp_num = qpn[1 - i];
      a.rq_psn = 100;
      if (mrc_modify_qp(
              qp[i], &a,
              IBV_QP_STATE | IBV_QP_AV | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_PATH_MTU, nullptr,
              0))
        _exit(15);
      ibv_qp_attr r{};
      r.qp_state = IBV_QPS_RTS;
      r.sq_psn = 100;
      if (mrc_modify_qp(qp[i], &r, IBV_QP_STATE | IBV_QP_SQ_PSN, nullptr, 0)) _exit(16);
    }
    // The ring, found where the library mapped it; its consumer index is far ahead.
    std::ifstream maps("/proc/self/maps");
    std::string line;
    uintptr_t ring = 0;
    while (std::getline(maps, line))
      if (line.find("softmrc-cq") != std::string::npos) ring = std::stoull(line, nullptr, 16);
    if (ring == 0) _exit(17);
    reinterpret_cast<softmrc::cq_ring::Header*>(ring)->consumed.store(1000);
    ibv_sge sge{reinterpret_cast<uintptr_t>(buf), 64, mr->lkey};
    ibv_send_wr wr{};
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(buf) + 4096;
    wr.wr.rdma.rkey = mr->rkey;
    ibv_send_wr* bad = nullptr;
    if (mrc_post_send(qp[0], &wr, &bad) != 0) _exit(18);
    ibv_wc wc{};
    int got = 0;
    for (int i = 0; i < 2000 && got == 0; ++i) got = mrc_poll_cq(cq, 1, &wc);
    if (got != 0) _exit(19);  // the completion could not be written: none arrives
    mrc_async_event ev{};
    if (mrc_get_async_event(ctx, &ev) != 0 || ev.event_type != IBV_EVENT_CQ_ERR ||
        ev.element.cq != cq)
      _exit(20);
    mrc_ack_async_event(&ev);
    // The device is alive and still serves the process.
    ibv_pd* pd2 = ibv_alloc_pd(v);
    if (pd2 == nullptr || ibv_dealloc_pd(pd2) != 0) _exit(21);
    _exit(0);
  }
  int st = 0;
  waitpid(app, &st, 0);
  ASSERT_TRUE(WIFEXITED(st)) << "the application hung or crashed (signal " << WTERMSIG(st) << ")";
  EXPECT_EQ(WEXITSTATUS(st), 0) << "step that failed: see the _exit codes in the test";
  EXPECT_EQ(kill(d.pid(), 0), 0) << "the device process died";
}

TEST(Softmrcd, TheDeviceProcessDyingIsFatalToApplicationsNeverAHang) {
  Daemon d;
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  const pid_t app = fork();
  if (app == 0) {
    alarm(30);  // a hang is a failure, not a stuck test
    setenv("MRC_SOFT_DEVICE", d.path().c_str(), 1);
    ibv_device** list = ibv_get_device_list(nullptr);
    ibv_context* v = list ? ibv_open_device(list[0]) : nullptr;
    mrc_context* ctx = v ? mrc_create_context(v, nullptr) : nullptr;
    mrc_comp_channel* ch = nullptr;
    if (ctx == nullptr || mrc_create_comp_channel(ctx, &ch) != 0) _exit(10);
    mrc_cq* cq = mrc_create_cq(ctx, 16, nullptr, ch, 0);
    ibv_pd* pd = ibv_alloc_pd(v);
    mrc_qp_init_attr qa{};
    qa.send_cq = qa.recv_cq = cq;
    qa.pd = pd;
    mrc_qp* qp = cq && pd ? mrc_create_qp(ctx, &qa) : nullptr;
    if (qp == nullptr || mrc_req_notify_cq(cq, 0) != 0) _exit(11);
    // A thread waiting for a completion event when the device goes.
    std::atomic<int> waiter_errno{0};
    std::thread waiter([&] {
      mrc_cq* got = nullptr;
      void* cq_ctx = nullptr;
      if (mrc_get_cq_event(ch, &got, &cq_ctx) != 0) waiter_errno = errno;
    });
    const char ready = 1;
    (void)!write(p[1], &ready, 1);
    mrc_async_event ev{};
    if (mrc_get_async_event(ctx, &ev) != 0 || ev.event_type != IBV_EVENT_DEVICE_FATAL) _exit(12);
    mrc_ack_async_event(&ev);
    waiter.join();
    if (waiter_errno != EIO) _exit(13);
    ibv_wc wc;
    if (mrc_poll_cq(cq, 1, &wc) != -1 || errno != EIO) _exit(14);
    ibv_sge sge{};
    ibv_send_wr wr{};
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_send_wr* bad = nullptr;
    if (mrc_post_send(qp, &wr, &bad) != EIO || bad != &wr) _exit(15);
    if (ibv_alloc_pd(v) != nullptr || mrc_create_cq(ctx, 4, nullptr, nullptr, 0) != nullptr)
      _exit(16);
    if (mrc_get_async_event(ctx, &ev) != -1 || errno != EIO) _exit(17);  // fatal once
    // Tearing down still works: the process's side is freed.
    if (mrc_destroy_qp(qp) || mrc_destroy_cq(cq) || mrc_destroy_comp_channel(ch) ||
        ibv_dealloc_pd(pd) || mrc_destroy_context(ctx) || ibv_close_device(v))
      _exit(18);
    _exit(0);
  }
  char ready = 0;
  ASSERT_EQ(read(p[0], &ready, 1), 1);
  usleep(100000);  // the waiter thread is in mrc_get_cq_event
  d.kill_now();
  int st = 0;
  waitpid(app, &st, 0);
  ASSERT_TRUE(WIFEXITED(st)) << "the application hung or crashed (signal " << WTERMSIG(st) << ")";
  EXPECT_EQ(WEXITSTATUS(st), 0) << "step that failed: see the _exit codes in the test";
  close(p[0]);
  close(p[1]);
}

// Memory per QP in device mode (README.md, "Memory per QP"): the engine's QP lives in the device
// process, the application keeps a handle. 64 more QPs in RTS with the device defaults take at
// most 256 KiB each, application and device together.
long rss_kib(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  return -1;
}

// A QP in RTS of `ctx` towards QPN `dest` of this node (the device's own GID: loopback I/O).
mrc_qp* rts_qp(ibv_context* v, mrc_context* ctx, ibv_pd* pd, mrc_cq* cq, uint32_t dest) {
  mrc_qp_init_attr qa{};
  qa.send_cq = qa.recv_cq = cq;
  qa.pd = pd;
  qa.cap.max_send_wr = 64;
  qa.cap.max_recv_wr = 16;
  qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
  qa.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE;
  mrc_qp* q = mrc_create_qp(ctx, &qa);
  if (q == nullptr) return nullptr;
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  if (mrc_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS, nullptr, 0) != 0) return nullptr;
  a = ibv_qp_attr{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.ah_attr.is_global = 1;
  a.ah_attr.port_num = 1;
  a.ah_attr.grh.sgid_index = 3;
  if (ibv_query_gid(v, 1, 3, &a.ah_attr.grh.dgid) != 0) return nullptr;
  a.dest_qp_num = dest;
  if (mrc_modify_qp(q, &a,
                    IBV_QP_STATE | IBV_QP_AV | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_PATH_MTU,
                    nullptr, 0) != 0)
    return nullptr;
  a = ibv_qp_attr{};
  a.qp_state = IBV_QPS_RTS;
  if (mrc_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_SQ_PSN, nullptr, 0) != 0) return nullptr;
  return q;
}

TEST(Softmrcd, AQpInRtsTakesAtMostItsDocumentedMemory) {
  constexpr int kQps = 64;
  constexpr long kQpFootprintBoundKib = 256;
  Daemon d;
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  const pid_t app = fork();
  if (app == 0) {
    alarm(60);
    setenv("MRC_SOFT_DEVICE", d.path().c_str(), 1);
    ibv_device** list = ibv_get_device_list(nullptr);
    ibv_context* v = list ? ibv_open_device(list[0]) : nullptr;
    mrc_context* ctx = v ? mrc_create_context(v, nullptr) : nullptr;
    ibv_pd* pd = v ? ibv_alloc_pd(v) : nullptr;
    mrc_cq* cq = ctx ? mrc_create_cq(ctx, 256, nullptr, nullptr, 0) : nullptr;
    if (pd == nullptr || cq == nullptr) _exit(10);
    // One QP first: what the device allocates once is not counted.
    mrc_qp* first = rts_qp(v, ctx, pd, cq, 0x100);
    uint32_t qpn = 0;
    if (first == nullptr || mrc_get_qpn(first, &qpn) != 0) _exit(11);
    const long app0 = rss_kib(getpid()), dev0 = rss_kib(d.pid());
    for (int i = 0; i < kQps; ++i)
      if (rts_qp(v, ctx, pd, cq, qpn) == nullptr) _exit(12);
    const long grown[2] = {rss_kib(getpid()) - app0, rss_kib(d.pid()) - dev0};
    if (app0 < 0 || dev0 < 0) _exit(13);
    (void)!write(p[1], grown, sizeof grown);
    _exit(0);
  }
  long grown[2] = {0, 0};
  const bool got = read(p[0], grown, sizeof grown) == static_cast<ssize_t>(sizeof grown);
  int st = 0;
  waitpid(app, &st, 0);
  close(p[0]);
  close(p[1]);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0)
      << "the application failed (exit " << WEXITSTATUS(st) << ", see its _exit codes)";
  ASSERT_TRUE(got);
  std::printf("memory per QP in RTS (device mode): application %ld KiB + device %ld KiB\n",
              grown[0] / kQps, grown[1] / kQps);
  EXPECT_LE((grown[0] + grown[1]) / kQps, kQpFootprintBoundKib)
      << "application " << grown[0] << " KiB, device " << grown[1] << " KiB for " << kQps
      << " QPs in RTS";
}

}  // namespace
