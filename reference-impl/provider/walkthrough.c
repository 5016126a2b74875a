/* walkthrough: an MRC application and its controller in one program, written for SoftMRC's
 * tests from the call sequences of the OCP walkthroughs (mrc_qp.md, mrc_ctl_exp_ev.md,
 * mrc_ctl_ev_probes.md, mrc_ctl_ev_events.md): open the device, configure an EV format, an
 * explicit EV profile and a CC profile, bring a QP through INIT/RTR/RTS on them, move data with
 * RDMA WRITE and WRITE with immediate, probe the peer over every EV, and watch an EV event.
 *
 *   walkthrough server TCP_PORT [MESSAGES] [BYTES]
 *   walkthrough client SERVER_IPV4 TCP_PORT [MESSAGES] [BYTES]   (both sides the same numbers)
 *   walkthrough controller DIR
 *
 * With WALKTHROUGH_CTL_DIR=DIR the controller is a process of its own (one device per node,
 * softmrcd): `controller DIR` configures the profiles, creates the EV event CQ and writes
 * DIR/ctl_ready; the client waits for it, names the controller's profiles at INIT, writes
 * DIR/qp_up (with the GIDs) once its QP is in RTS and, after the data, waits for DIR/ctl_done;
 * the controller then probes the server's node over every EV and marks an EV ASSUMED_BAD,
 * which the client's QP reports on the controller's EV event CQ. The server names no profiles
 * (its node has no controller) and checks that a controller call from it fails with EPERM
 * when it runs without CAP_NET_ADMIN (WALKTHROUGH_EXPECT_EPERM=1).
 *
 * Exit 0: every step worked and the server verified every byte; 1: a step failed (it is
 * named on stderr); 2: usage. Plain C on purpose: it must compile as applications do. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "mrc.h"
#include "mrc_ctl.h"

#define FMT_ID 13
#define EV_ID 1
#define CC_ID 2
#define NEVS 8

static int fail(const char* what) {
  fprintf(stderr, "walkthrough: %s failed: %s\n", what, strerror(errno));
  exit(1);
}

struct wire_info {
  uint32_t qpn, psn, rkey;
  uint64_t addr;
  uint8_t gid[16];
};

static void xfer(int fd, void* buf, size_t n, int send_it) {
  char* p = buf;
  while (n > 0) {
    ssize_t r = send_it ? send(fd, p, n, 0) : recv(fd, p, n, 0);
    if (r <= 0) fail("control connection");
    p += r;
    n -= (size_t)r;
  }
}

static uint8_t pattern(size_t i) { return (uint8_t)(i * 31 + 7); }

static struct mrc_ctl_ev ev_value(uint32_t i) {
  struct mrc_ctl_ev e;
  memset(&e, 0, sizeof e);
  uint32_t v = htonl(0x00010001u * (i + 1)); /* both 16-bit fields = index + 1, network order */
  memcpy(e.val, &v, 4);
  e.port = 1;
  return e;
}

/* mrc_ctl_exp_ev.md: an STEV format of two 16-bit fields, an explicit EV profile, a CC
 * profile. */
static void controller_setup(struct mrc_context* ctx) {
  struct mrc_ctl_ev_fmt_field fields[2] = {{16}, {16}};
  struct mrc_ctl_ev_fmt_profile_attr fa;
  memset(&fa, 0, sizeof fa);
  fa.profile_state = MRC_CTL_PROFILE_OFFLINE;
  fa.ev_fmt_mode = MRC_CTL_EV_FMT_MODE_STEV;
  fa.ev_fmt_op.op = MRC_CTL_EV_FMT_OP_MODIFY_FIELDS;
  fa.ev_fmt_op.fmt_fields = fields;
  fa.ev_fmt_op.fmt_field_count = 2;
  if (mrc_ctl_modify_ev_fmt_profile(ctx, FMT_ID, &fa,
                                    MRC_CTL_EV_FMT_PROFILE_STATE | MRC_CTL_EV_FMT_PROFILE_MODE |
                                        MRC_CTL_EV_FMT_PROFILE_OP))
    fail("EV format profile to OFFLINE");
  memset(&fa, 0, sizeof fa);
  fa.profile_state = MRC_CTL_PROFILE_ONLINE;
  if (mrc_ctl_modify_ev_fmt_profile(ctx, FMT_ID, &fa, MRC_CTL_EV_FMT_PROFILE_STATE))
    fail("EV format profile to ONLINE");

  struct mrc_ctl_ev_profile_attr ea;
  memset(&ea, 0, sizeof ea);
  ea.profile_state = MRC_CTL_PROFILE_OFFLINE;
  ea.ev_mode = MRC_CTL_EV_MODE_EXP;
  ea.ev_fmt_profile_id = FMT_ID;
  ea.ev_count = NEVS;
  ea.ev_min_active = NEVS / 4;
  ea.ev_event_mask = MRC_CTL_EV_GOOD | MRC_CTL_EV_ASSUMED_BAD;
  if (mrc_ctl_modify_ev_profile(ctx, EV_ID, &ea,
                                MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_MODE |
                                    MRC_CTL_EV_PROFILE_FMT_ID | MRC_CTL_EV_PROFILE_COUNT |
                                    MRC_CTL_EV_PROFILE_MIN_ACTIVE | MRC_CTL_EV_PROFILE_EVENT_MASK))
    fail("EV profile to OFFLINE");
  for (uint32_t i = 0; i < NEVS; i++) {
    struct mrc_ctl_ev_op_entry en;
    memset(&en, 0, sizeof en);
    en.ev = MRC_CTL_EV_UNPOPULATED;
    en.ev_new = ev_value(i);
    en.state = MRC_CTL_EV_GOOD;
    memset(&ea, 0, sizeof ea);
    ea.ev_op.op = MRC_CTL_EV_OP_REPLACE_EV;
    ea.ev_op.entries = &en;
    ea.ev_op.entry_count = 1;
    if (mrc_ctl_modify_ev_profile(ctx, EV_ID, &ea, MRC_CTL_EV_PROFILE_EV_OP)) fail("REPLACE_EV");
  }
  memset(&ea, 0, sizeof ea);
  ea.profile_state = MRC_CTL_PROFILE_ONLINE;
  if (mrc_ctl_modify_ev_profile(ctx, EV_ID, &ea, MRC_CTL_EV_PROFILE_STATE))
    fail("EV profile to ONLINE");

  /* NSCC scaled for namespaces on a shared host (reference-impl/runtime/cc-veth.toml). */
  static struct mrc_ctl_cc_nscc_cfg nscc = {
      .adjust_bytes_threshold = 32768, .adjust_period_threshold = 200000, .base_rtt = 100000,
      .eta = 600, .fi = 1, .fi_scale = 0.5f, .gamma = 0.8f, .max_md_jump = 0.5f,
      .max_cwnd = 4194304, .qa_gate = 3, .qa_threshold = 20000000, .target_delay = 2000000};
  struct mrc_ctl_cc_profile_attr ca;
  memset(&ca, 0, sizeof ca);
  ca.profile_state = MRC_CTL_PROFILE_OFFLINE;
  ca.algorithm = "uet-1.0-nscc";
  if (mrc_ctl_modify_cc_profile(ctx, CC_ID, &ca,
                                MRC_CTL_CC_PROFILE_STATE | MRC_CTL_CC_PROFILE_ALGORITHM))
    fail("CC profile to OFFLINE");
  memset(&ca, 0, sizeof ca);
  ca.profile_state = MRC_CTL_PROFILE_ONLINE;
  ca.cc_config = &nscc;
  if (mrc_ctl_modify_cc_profile(ctx, CC_ID, &ca, MRC_CTL_CC_PROFILE_STATE | MRC_CTL_CC_PROFILE_CONFIG))
    fail("CC profile to ONLINE");
}

static int poll_one(struct mrc_cq* cq, struct ibv_wc* wc) {
  time_t start = time(NULL);
  for (;;) {
    int n = mrc_poll_cq(cq, 1, wc);
    if (n < 0) fail("mrc_poll_cq");
    if (n == 1) return 0;
    if (time(NULL) - start > 20) {
      errno = ETIMEDOUT;
      fail("waiting for a completion");
    }
  }
}

/* DIR/name exists (split roles). */
static int have_file(const char* dir, const char* name) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  return access(path, F_OK) == 0;
}

static void wait_file(const char* dir, const char* name) {
  for (int i = 0; i < 600 && !have_file(dir, name); i++) usleep(50000);
  if (!have_file(dir, name)) {
    errno = ETIMEDOUT;
    fail(name);
  }
}

/* Written whole, then renamed: the reader never sees half a file. */
static void put_file(const char* dir, const char* name, const void* data, size_t n) {
  char path[512], tmp[520];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE* f = fopen(tmp, "w");
  if (!f || fwrite(data, 1, n, f) != n || fclose(f) || rename(tmp, path)) fail(path);
}

/* The controller as a process of its own (see the top of the file). */
static int controller_main(const char* dir) {
  struct ibv_device** list = ibv_get_device_list(NULL);
  if (!list || !list[0]) fail("ibv_get_device_list");
  struct ibv_context* vctx = ibv_open_device(list[0]);
  if (!vctx) fail("ibv_open_device");
  ibv_free_device_list(list);
  struct mrc_context_attr ctx_attr = {.mrc_api_version_used = MRC_API_CURRENT_VERSION};
  struct mrc_context* ctx = mrc_create_context(vctx, &ctx_attr);
  if (!ctx) fail("mrc_create_context");
  controller_setup(ctx);
  struct mrc_cq* ev_cq = mrc_ctl_create_ev_event_cq(ctx, 64, NULL, NULL, 0);
  if (!ev_cq) fail("mrc_ctl_create_ev_event_cq");
  put_file(dir, "ctl_ready", "1", 1);
  printf("controller: profiles ONLINE\n");
  fflush(stdout);
  wait_file(dir, "qp_up");
  uint8_t gids[32]; /* the client's, then the server's */
  char path[512];
  snprintf(path, sizeof path, "%s/qp_up", dir);
  FILE* f = fopen(path, "r");
  if (!f || fread(gids, 1, 32, f) != 32) fail("reading qp_up");
  fclose(f);
  struct mrc_ctl_ep_req reqs[NEVS];
  struct mrc_ctl_ep_rsp rsps[NEVS];
  memset(reqs, 0, sizeof reqs);
  for (int i = 0; i < NEVS; i++) {
    reqs[i].req_id = (uint16_t)(i + 1);
    memcpy(reqs[i].sgid.raw, gids, 16);
    memcpy(reqs[i].dgid.raw, gids + 16, 16);
    reqs[i].ev_fmt_mode = MRC_CTL_EV_FMT_MODE_STEV;
    reqs[i].req_ev = ev_value((uint32_t)i);
  }
  int nrsp = 0;
  if (mrc_ctl_ep_batch_send_wait(ctx, 0, MRC_CTL_EP_OP_EV_PROBE, reqs, NEVS, 2000000000u, rsps,
                                 &nrsp))
    fail("mrc_ctl_ep_batch_send_wait");
  printf("controller: %d probe responses\n", nrsp);
  struct mrc_ctl_ev_op_entry en;
  memset(&en, 0, sizeof en);
  en.ev = ev_value(3);
  en.state = MRC_CTL_EV_ASSUMED_BAD;
  struct mrc_ctl_ev_profile_attr ea;
  memset(&ea, 0, sizeof ea);
  ea.ev_op.op = MRC_CTL_EV_OP_MODIFY_EV_STATE;
  ea.ev_op.entries = &en;
  ea.ev_op.entry_count = 1;
  if (mrc_ctl_modify_ev_profile(ctx, EV_ID, &ea, MRC_CTL_EV_PROFILE_EV_OP)) fail("MODIFY_EV_STATE");
  struct mrc_ctl_ev_event evs[8];
  int nev = 0;
  for (int tries = 0; tries < 1000 && nev == 0; tries++) {
    nev = mrc_ctl_poll_ev_event(ev_cq, 8, evs);
    if (nev < 0) fail("mrc_ctl_poll_ev_event");
    if (nev == 0) usleep(1000);
  }
  struct mrc_ctl_ev want = ev_value(3);
  if (nev < 1 || evs[0].profile_id != EV_ID || evs[0].state != MRC_CTL_EV_ASSUMED_BAD ||
      memcmp(&evs[0].ev, &want, sizeof want)) {
    errno = EPROTO;
    fail("the EV event");
  }
  printf("controller: EV event ASSUMED_BAD on profile %llu\n",
         (unsigned long long)evs[0].profile_id);
  put_file(dir, "ctl_done", "1", 1);
  if (mrc_destroy_cq(ev_cq) || mrc_destroy_context(ctx) || ibv_close_device(vctx))
    fail("controller teardown");
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 3 && !strcmp(argv[1], "controller")) return controller_main(argv[2]);
  const char* ctl_dir = getenv("WALKTHROUGH_CTL_DIR");
  if (ctl_dir && !*ctl_dir) ctl_dir = NULL;
  if (argc < 3 || (strcmp(argv[1], "server") && strcmp(argv[1], "client")) ||
      (!strcmp(argv[1], "client") && argc < 4)) {
    fprintf(stderr, "usage: walkthrough server PORT [MESSAGES] [BYTES] | client SERVER_IPV4 PORT [MESSAGES] [BYTES]\n");
    return 2;
  }
  const int server = !strcmp(argv[1], "server");
  const int port = atoi(server ? argv[2] : argv[3]);
  const int first = server ? 3 : 4; /* MESSAGES, then BYTES */
  const int messages = argc > first ? atoi(argv[first]) : 64;
  const size_t bytes = argc > first + 1 ? (size_t)atol(argv[first + 1]) : 65536;
  if (messages <= 0 || bytes == 0) {
    fprintf(stderr, "walkthrough: MESSAGES and BYTES must be > 0\n");
    return 2;
  }

  /* Find and open the device (every walkthrough starts so). */
  struct ibv_device** list = ibv_get_device_list(NULL);
  if (!list || !list[0]) fail("ibv_get_device_list");
  struct ibv_context* vctx = ibv_open_device(list[0]);
  if (!vctx) fail("ibv_open_device");
  ibv_free_device_list(list);
  struct mrc_device_attr mattr;
  int supported = 0;
  if (mrc_query_device(vctx, &mattr, &supported) || !supported) fail("mrc_query_device");
  struct mrc_ctl_device_attr cattr;
  if (mrc_ctl_query_device(vctx, &cattr)) fail("mrc_ctl_query_device");
  if (!(cattr.ev.ev_mode_mask & MRC_CTL_EV_MODE_EXP)) fail("explicit EV mode");
  if (!(cattr.opt_attr & MRC_CTL_OPT_CAP_EP_OP_EV_PROBE)) fail("EV probe capability");
  struct mrc_context_attr ctx_attr = {.mrc_api_version_used = MRC_API_CURRENT_VERSION};
  struct mrc_context* ctx = mrc_create_context(vctx, &ctx_attr);
  if (!ctx) fail("mrc_create_context");
  struct mrc_cq* ev_cq = NULL;
  if (ctl_dir) {
    if (!server) wait_file(ctl_dir, "ctl_ready"); /* the controller's profiles are ONLINE */
    const char* eperm = getenv("WALKTHROUGH_EXPECT_EPERM");
    if (eperm && !strcmp(eperm, "1")) {
      struct mrc_ctl_cc_profile_attr ca;
      memset(&ca, 0, sizeof ca);
      ca.profile_state = MRC_CTL_PROFILE_OFFLINE;
      ca.algorithm = "uet-1.0-nscc";
      if (mrc_ctl_modify_cc_profile(ctx, 77, &ca,
                                    MRC_CTL_CC_PROFILE_STATE | MRC_CTL_CC_PROFILE_ALGORITHM) == 0 ||
          errno != EPERM) {
        errno = EPROTO;
        fail("a controller call without CAP_NET_ADMIN (must be EPERM)");
      }
      printf("%s: controller call without CAP_NET_ADMIN refused with EPERM\n", argv[1]);
    }
  } else {
    controller_setup(ctx);
    ev_cq = mrc_ctl_create_ev_event_cq(ctx, 64, NULL, NULL, 0);
    if (!ev_cq) fail("mrc_ctl_create_ev_event_cq");
  }

  /* mrc_qp.md: PD, CQ, hint, QP. */
  struct ibv_pd* pd = ibv_alloc_pd(vctx);
  if (!pd) fail("ibv_alloc_pd");
  struct mrc_cq* cq = mrc_create_cq(ctx, 1024, NULL, NULL, 0);
  if (!cq) fail("mrc_create_cq");
  struct mrc_qp_hint_init_attr hint_attr = {
      .attr = {.num_qps_per_peer = 1, .num_send_peers = 1, .num_remote_recv_peers = 1}};
  struct mrc_qp_hint* hint = mrc_create_qp_hint(ctx, &hint_attr);
  if (!hint) fail("mrc_create_qp_hint");
  struct mrc_qp_init_attr qia = {
      .send_cq = cq,
      .recv_cq = cq,
      .cap = {.max_send_wr = 128, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1},
      .pd = pd,
      .send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM,
      .protocol_version = MRC_PROTOCOL_VERSION_1};
  struct mrc_qp* qp = mrc_create_qp(ctx, &qia);
  if (!qp) fail("mrc_create_qp");

  size_t buf_len = bytes * (size_t)messages;
  unsigned char* buf = aligned_alloc(4096, (buf_len + 4095) / 4096 * 4096);
  if (!buf) fail("aligned_alloc");
  memset(buf, 0, buf_len);
  if (!server)
    for (size_t i = 0; i < buf_len; i++) buf[i] = pattern(i);
  struct ibv_mr* mr = ibv_reg_mr(pd, buf, buf_len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (!mr) fail("ibv_reg_mr");

  struct ibv_qp_attr v = {.qp_state = IBV_QPS_INIT,
                          .qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE};
  struct mrc_qp_attr m = {.profile = {.ev_profile_id = EV_ID, .cc_profile_id = CC_ID},
                          .qp_hint = hint};
  /* Split roles: the server's node has no controller, its QP takes the device's profiles. */
  const int use_profiles = !(ctl_dir && server);
  if (mrc_modify_qp(qp, &v, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS, &m,
                    (use_profiles ? MRC_QP_EV_PROFILE_ID | MRC_QP_CC_PROFILE_ID : 0) | MRC_QP_HINT))
    fail("QP to INIT");

  /* Exchange QPN, PSN, GID, rkey and address over TCP (IPv4, as the OCP benchmark does). */
  struct wire_info me = {.rkey = mr->rkey, .addr = (uintptr_t)buf, .psn = (uint32_t)getpid() & 0xFFFFFF};
  if (mrc_get_qpn(qp, &me.qpn)) fail("mrc_get_qpn");
  union ibv_gid gid;
  if (ibv_query_gid(vctx, 1, 3, &gid)) fail("ibv_query_gid");
  memcpy(me.gid, gid.raw, 16);
  struct wire_info peer;
  int fd = -1;
  if (server) {
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    int on = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (bind(ls, (struct sockaddr*)&sa, sizeof sa) || listen(ls, 1)) fail("listen");
    fd = accept(ls, NULL, NULL);
    close(ls);
    if (fd < 0) fail("accept");
  } else {
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, argv[2], &sa.sin_addr) != 1) fail("server address");
    fd = socket(AF_INET, SOCK_STREAM, 0);
    int tries = 0;
    while (connect(fd, (struct sockaddr*)&sa, sizeof sa)) {
      if (++tries > 100) fail("connect");
      usleep(100000);
    }
  }
  xfer(fd, &me, sizeof me, 1);
  xfer(fd, &peer, sizeof peer, 0);

  memset(&v, 0, sizeof v);
  v.qp_state = IBV_QPS_RTR;
  v.path_mtu = IBV_MTU_4096;
  v.ah_attr.is_global = 1;
  v.ah_attr.port_num = 1;
  v.ah_attr.grh.sgid_index = 3;
  memcpy(v.ah_attr.grh.dgid.raw, peer.gid, 16);
  v.dest_qp_num = peer.qpn;
  v.rq_psn = peer.psn;
  memset(&m, 0, sizeof m);
  m.mpr.mpr_dest = 32;
  m.wimm.max_wimm_dest = 16;
  m.cap = MRC_QP_CAP_DYNAMIC_MPR;
  if (mrc_modify_qp(qp, &v,
                    IBV_QP_STATE | IBV_QP_AV | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_PATH_MTU,
                    &m, MRC_QP_MPR_DEST | MRC_QP_MAX_WIMM_DEST | MRC_QP_CAP))
    fail("QP to RTR");
  memset(&v, 0, sizeof v);
  v.qp_state = IBV_QPS_RTS;
  v.sq_psn = me.psn;
  memset(&m, 0, sizeof m);
  m.mpr.mpr = 32;
  m.wimm.max_wimm = 16;
  m.timeout = 18;
  m.retry.linear_cnt = 7;
  m.retry.exp_cnt = 7;
  if (mrc_modify_qp(qp, &v, IBV_QP_STATE | IBV_QP_SQ_PSN, &m,
                    MRC_QP_MPR | MRC_QP_MAX_WIMM | MRC_QP_TIMEOUT | MRC_QP_RETRY_CNT))
    fail("QP to RTS");
  struct mrc_qp_attr got;
  if (mrc_query_qp(qp, NULL, 0, &got, MRC_QP_EV_PROFILE_ID | MRC_QP_MPR, NULL)) fail("mrc_query_qp");
  if ((use_profiles && got.profile.ev_profile_id != EV_ID) || got.mpr.mpr != 32) {
    errno = EPROTO;
    fail("mrc_query_qp values");
  }

  int rc = 0;
  if (server) {
    struct ibv_recv_wr rwr = {.wr_id = 42}, *bad_r = NULL;
    if (mrc_post_recv(qp, &rwr, &bad_r)) fail("mrc_post_recv");
    char go = 1;
    xfer(fd, &go, 1, 1); /* the receive is posted: the client may write */
    struct ibv_wc wc;
    poll_one(cq, &wc);
    if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM || wc.wr_id != 42 ||
        ntohl(wc.imm_data) != (uint32_t)buf_len / (uint32_t)bytes) {
      fprintf(stderr, "completion: status %s opcode %d wr_id %llu imm %u\n",
              ibv_wc_status_str(wc.status), (int)wc.opcode, (unsigned long long)wc.wr_id,
              ntohl(wc.imm_data));
      errno = EPROTO;
      fail("the WRITE_WITH_IMM completion");
    }
    size_t bad = 0;
    for (size_t i = 0; i < buf_len; i++)
      if (buf[i] != pattern(i)) bad++;
    char verdict = bad == 0;
    printf("server: %zu bytes in %zu messages, %zu wrong\n", buf_len, buf_len / bytes, bad);
    xfer(fd, &verdict, 1, 1);
    xfer(fd, &verdict, 1, 0); /* the client's probes are done: the device may close */
    rc = bad == 0 ? 0 : 1;
  } else {
    char go;
    xfer(fd, &go, 1, 0);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    struct ibv_sge sge = {.lkey = mr->lkey};
    struct ibv_send_wr wr = {.sg_list = &sge, .num_sge = 1}, *bad = NULL;
    int posted = 0, done = 0;
    while (done < messages) {
      while (posted < messages && posted - done < 64) {
        sge.addr = (uintptr_t)buf + (size_t)posted * bytes;
        sge.length = (uint32_t)bytes;
        wr.wr_id = (uint64_t)posted;
        wr.wr.rdma.remote_addr = peer.addr + (size_t)posted * bytes;
        wr.wr.rdma.rkey = peer.rkey;
        wr.send_flags = IBV_SEND_SIGNALED;
        const int last = posted == messages - 1;
        wr.opcode = last ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
        wr.imm_data = htonl((uint32_t)messages);
        if (mrc_post_send(qp, &wr, &bad)) fail("mrc_post_send");
        posted++;
      }
      struct ibv_wc wc;
      poll_one(cq, &wc);
      if (wc.status != IBV_WC_SUCCESS) {
        fprintf(stderr, "completion %s\n", ibv_wc_status_str(wc.status));
        errno = EIO;
        fail("a WRITE");
      }
      done++;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    const double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("client: %d x %zu B in %.3f s, %.3f Gbit/s\n", messages, bytes, s,
           (double)buf_len * 8 / s / 1e9);
    char verdict = 0;
    xfer(fd, &verdict, 1, 0);
    if (!verdict) {
      errno = EPROTO;
      fail("the server's verification");
    }

    if (ctl_dir) {
      /* The controller (another process) probes and raises the EV event on our QP's profile;
       * the QP stays until it is done. */
      uint8_t gids[32];
      memcpy(gids, me.gid, 16);
      memcpy(gids + 16, peer.gid, 16);
      put_file(ctl_dir, "qp_up", gids, 32);
      wait_file(ctl_dir, "ctl_done");
      xfer(fd, &verdict, 1, 1);
      goto done;
    }
    /* mrc_ctl_ev_probes.md: one probe per EV of the profile, to the server, in one batch. */
    struct mrc_ctl_ep_req reqs[NEVS];
    struct mrc_ctl_ep_rsp rsps[NEVS];
    memset(reqs, 0, sizeof reqs);
    for (int i = 0; i < NEVS; i++) {
      reqs[i].req_id = (uint16_t)(i + 1);
      memcpy(reqs[i].sgid.raw, me.gid, 16);
      memcpy(reqs[i].dgid.raw, peer.gid, 16);
      reqs[i].ev_fmt_mode = MRC_CTL_EV_FMT_MODE_STEV;
      reqs[i].req_ev = ev_value((uint32_t)i);
    }
    int nrsp = 0;
    if (mrc_ctl_ep_batch_send_wait(ctx, 0, MRC_CTL_EP_OP_EV_PROBE, reqs, NEVS, 2000000000u, rsps,
                                   &nrsp))
      fail("mrc_ctl_ep_batch_send_wait");
    unsigned max_rtt = 0;
    for (int i = 0; i < nrsp; i++)
      if (rsps[i].rtt > max_rtt) max_rtt = rsps[i].rtt;
    printf("client: %d probe responses, largest RTT %u ns\n", nrsp, max_rtt);

    /* mrc_ctl_ev_events.md: an EV the controller marks ASSUMED_BAD is reported on the EV CQ. */
    struct mrc_ctl_ev_op_entry en;
    memset(&en, 0, sizeof en);
    en.ev = ev_value(3);
    en.state = MRC_CTL_EV_ASSUMED_BAD;
    struct mrc_ctl_ev_profile_attr ea;
    memset(&ea, 0, sizeof ea);
    ea.ev_op.op = MRC_CTL_EV_OP_MODIFY_EV_STATE;
    ea.ev_op.entries = &en;
    ea.ev_op.entry_count = 1;
    if (mrc_ctl_modify_ev_profile(ctx, EV_ID, &ea, MRC_CTL_EV_PROFILE_EV_OP)) fail("MODIFY_EV_STATE");
    struct mrc_ctl_ev_event evs[8];
    int nev = 0;
    for (int tries = 0; tries < 1000 && nev == 0; tries++) {
      nev = mrc_ctl_poll_ev_event(ev_cq, 8, evs);
      if (nev < 0) fail("mrc_ctl_poll_ev_event");
      if (nev == 0) usleep(1000);
    }
    struct mrc_ctl_ev want = ev_value(3);
    if (nev < 1 || evs[0].profile_id != EV_ID || evs[0].state != MRC_CTL_EV_ASSUMED_BAD ||
        memcmp(&evs[0].ev, &want, sizeof want)) {
      errno = EPROTO;
      fail("the EV event");
    }
    printf("client: EV event ASSUMED_BAD on profile %llu\n", (unsigned long long)evs[0].profile_id);
    xfer(fd, &verdict, 1, 1);
  }
done:
  close(fd);

  if (mrc_destroy_qp(qp) || mrc_destroy_qp_hint(hint) || mrc_destroy_cq(cq) ||
      (ev_cq && mrc_destroy_cq(ev_cq)) || ibv_dereg_mr(mr) || ibv_dealloc_pd(pd) || mrc_destroy_context(ctx) ||
      ibv_close_device(vctx))
    fail("teardown");
  free(buf);
  return rc;
}
