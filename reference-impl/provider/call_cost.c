/* call_cost: what one lib_mrc.so call costs the application, in-process or in device mode
 * (MRC_SOFT_DEVICE): an empty mrc_poll_cq, and mrc_post_send of one 64-byte RDMA WRITE on a QP
 * in RTS. The WRITEs go to DEST_GID, a node with no MRC endpoint (they are never answered: only
 * the call is timed, not the transfer), so the QP's send queue bounds how many are posted.
 * Then the memory 64 more QPs in RTS take: the resident set's growth of this process and, with
 * CALL_COST_DEVICE_PID=<softmrcd's pid>, of the device process.
 *
 *   call_cost DEST_GID [POLLS] [POSTS]
 *
 * Prints one JSON line: {"mode":..., "poll_ns":..., "post_ns":..., "qp64_rss_kib":...,
 * "qp64_device_rss_kib":...} (means per call; kibibytes for 64 QPs). Exit 0, 1 on a failed call
 * (named on stderr), 2 usage. Plain C, built as applications build. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mrc.h"

static void fail(const char* what) {
  fprintf(stderr, "call_cost: %s failed: %s\n", what, strerror(errno));
  exit(1);
}

/* VmRSS of a process in KiB, -1 when it cannot be read. */
static long rss_kib(const char* pid) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%s/status", pid);
  FILE* f = fopen(path, "r");
  long kib = -1;
  if (f == NULL) return -1;
  while (fgets(line, sizeof line, f) != NULL)
    if (strncmp(line, "VmRSS:", 6) == 0) kib = atol(line + 6);
  fclose(f);
  return kib;
}

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* A QP in RTS towards dest (QPN 0x100 there). */
static struct mrc_qp* rts_qp(struct mrc_context* ctx, struct ibv_pd* pd, struct mrc_cq* cq,
                             uint32_t send_wr, const struct in6_addr* dest) {
  struct mrc_qp_init_attr qa;
  memset(&qa, 0, sizeof qa);
  qa.send_cq = cq;
  qa.recv_cq = cq;
  qa.pd = pd;
  qa.cap.max_send_wr = send_wr;
  qa.cap.max_recv_wr = 1;
  qa.cap.max_send_sge = 1;
  qa.cap.max_recv_sge = 1;
  qa.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE;
  struct mrc_qp* qp = mrc_create_qp(ctx, &qa);
  if (qp == NULL) fail("mrc_create_qp");
  struct ibv_qp_attr v;
  memset(&v, 0, sizeof v);
  v.qp_state = IBV_QPS_INIT;
  v.port_num = 1;
  v.qp_access_flags = IBV_ACCESS_LOCAL_WRITE;
  if (mrc_modify_qp(qp, &v, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS, NULL, 0)) fail("INIT");
  memset(&v, 0, sizeof v);
  v.qp_state = IBV_QPS_RTR;
  v.path_mtu = IBV_MTU_1024;
  v.ah_attr.is_global = 1;
  v.ah_attr.port_num = 1;
  v.ah_attr.grh.sgid_index = 3;
  memcpy(v.ah_attr.grh.dgid.raw, dest, 16);
  v.dest_qp_num = 0x100;
  if (mrc_modify_qp(qp, &v,
                    IBV_QP_STATE | IBV_QP_AV | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_PATH_MTU,
                    NULL, 0))
    fail("RTR");
  memset(&v, 0, sizeof v);
  v.qp_state = IBV_QPS_RTS;
  if (mrc_modify_qp(qp, &v, IBV_QP_STATE | IBV_QP_SQ_PSN, NULL, 0)) fail("RTS");
  return qp;
}

int main(int argc, char** argv) {
  if (argc < 2 || argc > 4) {
    fprintf(stderr, "usage: call_cost DEST_GID [POLLS] [POSTS]\n");
    return 2;
  }
  struct in6_addr dest;
  const long polls = argc > 2 ? atol(argv[2]) : 200000;
  const long posts = argc > 3 ? atol(argv[3]) : 1000;
  if (inet_pton(AF_INET6, argv[1], &dest) != 1 || polls <= 0 || posts <= 0 || posts > 4096) {
    fprintf(stderr, "call_cost: DEST_GID must be an IPv6 address, POLLS > 0, 0 < POSTS <= 4096\n");
    return 2;
  }
  int n = 0;
  struct ibv_device** list = ibv_get_device_list(&n);
  if (list == NULL || n < 1) fail("ibv_get_device_list");
  struct ibv_context* vctx = ibv_open_device(list[0]);
  if (vctx == NULL) fail("ibv_open_device");
  struct mrc_context_attr ca = {MRC_API_CURRENT_VERSION, 0};
  struct mrc_context* ctx = mrc_create_context(vctx, &ca);
  if (ctx == NULL) fail("mrc_create_context");
  struct ibv_pd* pd = ibv_alloc_pd(vctx);
  if (pd == NULL) fail("ibv_alloc_pd");
  struct mrc_cq* cq = mrc_create_cq(ctx, 8192, NULL, NULL, 0);
  if (cq == NULL) fail("mrc_create_cq");

  struct ibv_wc wc[16];
  double t0 = now_ns();
  for (long i = 0; i < polls; ++i)
    if (mrc_poll_cq(cq, 16, wc) != 0) fail("mrc_poll_cq (expected an empty CQ)");
  const double poll_ns = (now_ns() - t0) / (double)polls;

  static char buf[4096] __attribute__((aligned(4096)));
  struct ibv_mr* mr = ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE);
  if (mr == NULL) fail("ibv_reg_mr");
  struct mrc_qp* qp = rts_qp(ctx, pd, cq, (uint32_t)posts, &dest);

  struct ibv_sge sge = {(uintptr_t)buf, 64, mr->lkey};
  struct ibv_send_wr wr;
  memset(&wr, 0, sizeof wr);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = 0x10000;
  wr.wr.rdma.rkey = 1;
  t0 = now_ns();
  for (long i = 0; i < posts; ++i) {
    struct ibv_send_wr* bad = NULL;
    wr.wr_id = (uint64_t)i;
    if (mrc_post_send(qp, &wr, &bad)) fail("mrc_post_send");
  }
  const double post_ns = (now_ns() - t0) / (double)posts;

  const char* dev_pid = getenv("CALL_COST_DEVICE_PID");
  const long self0 = rss_kib("self"), dev0 = dev_pid ? rss_kib(dev_pid) : -1;
  struct mrc_qp* more[64];
  for (int i = 0; i < 64; ++i) more[i] = rts_qp(ctx, pd, cq, 128, &dest);
  const long self1 = rss_kib("self"), dev1 = dev_pid ? rss_kib(dev_pid) : -1;
  for (int i = 0; i < 64; ++i)
    if (mrc_destroy_qp(more[i])) fail("mrc_destroy_qp");

  printf(
      "{\"mode\":\"%s\",\"polls\":%ld,\"poll_ns\":%.0f,\"posts\":%ld,\"post_ns\":%.0f,"
      "\"qp64_rss_kib\":%ld,\"qp64_device_rss_kib\":%ld}\n",
      getenv("MRC_SOFT_DEVICE") ? "device" : "in-process", polls, poll_ns, posts, post_ns,
      self1 - self0, dev_pid && dev0 >= 0 && dev1 >= 0 ? dev1 - dev0 : -1);
  if (mrc_destroy_qp(qp) || ibv_dereg_mr(mr) || mrc_destroy_cq(cq) || ibv_dealloc_pd(pd) ||
      mrc_destroy_context(ctx) || ibv_close_device(vctx))
    fail("teardown");
  ibv_free_device_list(list);
  return 0;
}
