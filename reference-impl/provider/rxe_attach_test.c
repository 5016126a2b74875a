/* The provider attached to rxe (run in the SoftRoCE lab's guest, lab/guest/labjob.sh
 * lab_attach_test): one process, two rxe devices on the two ends of the lab's wire, MRC through
 * lib_mrc.so on both.
 *
 *   rxe_attach_test DEV_A GID_A DEV_B GID_B
 *
 * Checks, each printed as "ok: ..." or "FAIL: ...":
 *   - the rxe devices' own contexts support MRC (mrc_query_device) and take an MRC context;
 *   - ibv_reg_mr on rxe returns rxe's keys: the MR is the real rdma-core object, the kernel
 *     lists it with the same rkey, lkey and length;
 *   - a WRITE with that rkey lands, byte for byte;
 *   - a WRITE with a wrong rkey, one that crosses the MR's end, and one to an MR without remote
 *     write access each complete with IBV_WC_REM_ACCESS_ERR and write nothing (guard bytes on
 *     both sides of the region included).
 * Prints "mr DEV lkey 0x.. rkey 0x.. length N" lines and checks them against `rdma resource
 * show mr` (iproute2, in the guest); exit 0 when every check passed, 1 otherwise,
 * 2 usage. */
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mrc.h"

#define REGION 65536
#define GUARD 4096
#define MSG 4096

static int failures;

static void check(int ok, const char* what) {
  printf("%s: %s\n", ok ? "ok" : "FAIL", what);
  if (!ok) failures++;
  fflush(stdout);
}

static void die(const char* what) {
  fprintf(stderr, "rxe_attach_test: %s: %s\n", what, strerror(errno));
  exit(1);
}

struct side {
  const char* name;
  struct in6_addr gid;
  struct ibv_context* vctx;
  struct mrc_context* ctx;
  struct ibv_pd* pd;
  struct mrc_cq* cq;
  int sgid_index;
};

/* The last port-1 GID table entry holding the address (rdma-core lists RoCE v1 before v2). */
static int gid_index_of(struct ibv_context* vctx, const struct in6_addr* want) {
  struct ibv_port_attr pa;
  if (ibv_query_port(vctx, 1, &pa)) die("ibv_query_port");
  int found = -1;
  for (int i = 0; i < pa.gid_tbl_len; i++) {
    union ibv_gid g;
    if (ibv_query_gid(vctx, 1, i, &g) == 0 && memcmp(g.raw, want, 16) == 0) found = i;
  }
  return found;
}

static void open_side(struct side* s, struct ibv_device** list, int n) {
  for (int i = 0; i < n; i++)
    if (strcmp(ibv_get_device_name(list[i]), s->name) == 0) s->vctx = ibv_open_device(list[i]);
  if (!s->vctx) die(s->name);
  struct mrc_device_attr attr;
  int supported = 0;
  if (mrc_query_device(s->vctx, &attr, &supported)) die("mrc_query_device");
  char what[128];
  snprintf(what, sizeof what, "%s supports MRC (mrc_query_device)", s->name);
  check(supported == 1, what);
  s->ctx = mrc_create_context(s->vctx, NULL);
  snprintf(what, sizeof what, "%s takes an MRC context", s->name);
  check(s->ctx != NULL, what);
  if (!s->ctx) exit(1);
  s->pd = ibv_alloc_pd(s->vctx);
  if (!s->pd) die("ibv_alloc_pd");
  s->cq = mrc_create_cq(s->ctx, 256, NULL, NULL, 0);
  if (!s->cq) die("mrc_create_cq");
  s->sgid_index = gid_index_of(s->vctx, &s->gid);
  if (s->sgid_index < 0) {
    errno = ENOENT;
    die("the GID is not in the device's GID table");
  }
}

static struct mrc_qp* make_qp(struct side* s) {
  struct mrc_qp_init_attr qia = {
      .send_cq = s->cq,
      .recv_cq = s->cq,
      .cap = {.max_send_wr = 16, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1},
      .pd = s->pd,
      .send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE,
      .protocol_version = MRC_PROTOCOL_VERSION_1};
  struct mrc_qp* qp = mrc_create_qp(s->ctx, &qia);
  if (!qp) die("mrc_create_qp");
  struct ibv_qp_attr v = {.qp_state = IBV_QPS_INIT,
                          .qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE};
  struct mrc_qp_attr m;
  memset(&m, 0, sizeof m);
  if (mrc_modify_qp(qp, &v, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS, &m, 0)) die("QP to INIT");
  return qp;
}

static void connect_qp(struct mrc_qp* qp, const struct side* me, const struct side* peer,
                       uint32_t peer_qpn) {
  struct ibv_qp_attr v;
  memset(&v, 0, sizeof v);
  v.qp_state = IBV_QPS_RTR;
  v.path_mtu = IBV_MTU_4096;
  v.ah_attr.is_global = 1;
  v.ah_attr.port_num = 1;
  v.ah_attr.grh.sgid_index = (uint8_t)me->sgid_index;
  memcpy(v.ah_attr.grh.dgid.raw, &peer->gid, 16);
  v.dest_qp_num = peer_qpn;
  v.rq_psn = 1000;
  struct mrc_qp_attr m;
  memset(&m, 0, sizeof m);
  m.mpr.mpr_dest = 32;
  m.wimm.max_wimm_dest = 4;
  if (mrc_modify_qp(qp, &v,
                    IBV_QP_STATE | IBV_QP_AV | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_PATH_MTU,
                    &m, MRC_QP_MPR_DEST | MRC_QP_MAX_WIMM_DEST))
    die("QP to RTR");
  memset(&v, 0, sizeof v);
  v.qp_state = IBV_QPS_RTS;
  v.sq_psn = 1000;
  memset(&m, 0, sizeof m);
  m.mpr.mpr = 32;
  m.wimm.max_wimm = 4;
  m.timeout = 14;
  m.retry.linear_cnt = 7;
  m.retry.exp_cnt = 7;
  if (mrc_modify_qp(qp, &v, IBV_QP_STATE | IBV_QP_SQ_PSN, &m,
                    MRC_QP_MPR | MRC_QP_MAX_WIMM | MRC_QP_TIMEOUT | MRC_QP_RETRY_CNT))
    die("QP to RTS");
}

/* A connected pair: requester on a, responder on b. */
static struct mrc_qp* pair(struct side* a, struct side* b) {
  struct mrc_qp* qa = make_qp(a);
  struct mrc_qp* qb = make_qp(b);
  uint32_t na, nb;
  if (mrc_get_qpn(qa, &na) || mrc_get_qpn(qb, &nb)) die("mrc_get_qpn");
  connect_qp(qa, a, b, nb);
  connect_qp(qb, b, a, na);
  return qa;
}

/* Posts one WRITE and waits (20 s at most) for its completion; returns its status. */
static enum ibv_wc_status write_one(struct side* a, struct mrc_qp* qp, struct ibv_mr* src,
                                    uint64_t remote_addr, uint32_t rkey, uint64_t wr_id) {
  struct ibv_sge sge = {.addr = (uintptr_t)src->addr, .length = MSG, .lkey = src->lkey};
  struct ibv_send_wr wr = {.wr_id = wr_id,
                           .sg_list = &sge,
                           .num_sge = 1,
                           .opcode = IBV_WR_RDMA_WRITE,
                           .send_flags = IBV_SEND_SIGNALED};
  wr.wr.rdma.remote_addr = remote_addr;
  wr.wr.rdma.rkey = rkey;
  struct ibv_send_wr* bad = NULL;
  if (mrc_post_send(qp, &wr, &bad)) die("mrc_post_send");
  time_t start = time(NULL);
  for (;;) {
    struct ibv_wc wc;
    int n = mrc_poll_cq(a->cq, 1, &wc);
    if (n < 0) die("mrc_poll_cq");
    if (n == 1 && wc.wr_id == wr_id) return wc.status;
    if (time(NULL) - start > 20) return IBV_WC_GENERAL_ERR;
    struct timespec ts = {0, 200000};
    nanosleep(&ts, NULL);
  }
}

int main(int argc, char** argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: rxe_attach_test DEV_A GID_A DEV_B GID_B\n");
    return 2;
  }
  struct side a = {.name = argv[1]}, b = {.name = argv[3]};
  if (inet_pton(AF_INET6, argv[2], &a.gid) != 1 || inet_pton(AF_INET6, argv[4], &b.gid) != 1) {
    fprintf(stderr, "rxe_attach_test: GID_A and GID_B are IPv6 addresses\n");
    return 2;
  }
  int n = 0;
  struct ibv_device** list = ibv_get_device_list(&n);
  if (!list) die("ibv_get_device_list");
  open_side(&a, list, n);
  open_side(&b, list, n);

  /* Responder memory: a remote-write region between two guards, and a region without remote
   * write access. Requester memory: the message. */
  unsigned char* dst = aligned_alloc(4096, REGION + 2 * GUARD);
  unsigned char* ro = aligned_alloc(4096, REGION);
  unsigned char* src = aligned_alloc(4096, MSG);
  if (!dst || !ro || !src) die("aligned_alloc");
  memset(dst, 0x5A, REGION + 2 * GUARD);
  memset(ro, 0x3C, REGION);
  for (int i = 0; i < MSG; i++) src[i] = (unsigned char)(i * 7 + 1);
  struct ibv_mr* mr =
      ibv_reg_mr(b.pd, dst + GUARD, REGION, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  struct ibv_mr* mr_ro = ibv_reg_mr(b.pd, ro, REGION, IBV_ACCESS_LOCAL_WRITE);
  struct ibv_mr* mr_src = ibv_reg_mr(a.pd, src, MSG, IBV_ACCESS_LOCAL_WRITE);
  if (!mr || !mr_ro || !mr_src) die("ibv_reg_mr");
  printf("mr %s lkey 0x%x rkey 0x%x length %d\n", b.name, mr->lkey, mr->rkey, REGION);
  printf("mr %s lkey 0x%x rkey 0x%x length %d\n", b.name, mr_ro->lkey, mr_ro->rkey, REGION);
  check(mr->context == b.vctx && mr->pd == b.pd, "the MR belongs to the rxe context and PD");

  unsigned char* before = malloc(REGION + 2 * GUARD);
  if (!before) die("malloc");
  struct mrc_qp* qp = pair(&a, &b);
  const uint64_t base = (uintptr_t)(dst + GUARD);
  enum ibv_wc_status st = write_one(&a, qp, mr_src, base + 8192, mr->rkey, 1);
  printf("  write with rxe's rkey: %s\n", ibv_wc_status_str(st));
  check(st == IBV_WC_SUCCESS && memcmp(dst + GUARD + 8192, src, MSG) == 0,
        "a WRITE with the MR's rkey lands byte for byte");

  memcpy(before, dst, REGION + 2 * GUARD);
  st = write_one(&a, qp, mr_src, base, mr->rkey ^ 0x5A5A00, 2);
  printf("  write with a wrong rkey: %s\n", ibv_wc_status_str(st));
  check(st == IBV_WC_REM_ACCESS_ERR && memcmp(before, dst, REGION + 2 * GUARD) == 0,
        "a WRITE with a wrong rkey: remote access error, nothing written");

  qp = pair(&a, &b);
  st = write_one(&a, qp, mr_src, base + REGION - MSG / 2, mr->rkey, 3);
  printf("  write across the MR's end: %s\n", ibv_wc_status_str(st));
  check(st == IBV_WC_REM_ACCESS_ERR && memcmp(before, dst, REGION + 2 * GUARD) == 0,
        "a WRITE across the MR's end: remote access error, nothing written");

  qp = pair(&a, &b);
  unsigned char* ro_before = malloc(REGION);
  if (!ro_before) die("malloc");
  memcpy(ro_before, ro, REGION);
  /* rxe gives an MR without remote access rkey 0; name its lkey as the rkey too. */
  st = write_one(&a, qp, mr_src, (uintptr_t)ro, mr_ro->rkey ? mr_ro->rkey : mr_ro->lkey, 4);
  printf("  write to an MR without remote write: %s\n", ibv_wc_status_str(st));
  check(st == IBV_WC_REM_ACCESS_ERR && memcmp(ro_before, ro, REGION) == 0,
        "a WRITE to an MR without remote write access: remote access error, nothing written");

  /* rxe's own view of the MR (iproute2's `rdma resource show mr`, netlink to the kernel): the
   * same keys and length, so the MR MRC checks WRITEs against is rxe's. */
  char cmd[160], line[512], want_r[64], want_l[64], want_len[64];
  snprintf(cmd, sizeof cmd, "rdma resource show mr dev %s 2>&1", b.name);
  snprintf(want_r, sizeof want_r, "rkey 0x%x ", mr->rkey);
  snprintf(want_l, sizeof want_l, "lkey 0x%x ", mr->lkey);
  snprintf(want_len, sizeof want_len, "mrlen %d ", REGION);
  FILE* p = popen(cmd, "r");
  int seen = 0;
  while (p && fgets(line, sizeof line, p)) {
    printf("  %s", line);
    if (strstr(line, want_r) && strstr(line, want_l) && strstr(line, want_len)) seen = 1;
  }
  if (p) pclose(p);
  check(seen, "rxe lists the MR with the same rkey, lkey and length (rdma resource show mr)");

  printf("%d check(s) failed\n", failures);
  return failures ? 1 : 0;
}
