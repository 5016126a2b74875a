/* mrc-perf's script mode: the implementation side of a conformance script (*.mrcs,
 * docs/scripts.md) on a lib_mrc.so, through mrc.h and libibverbs only.
 *
 * The DUT contract's script mode (ci/dut/README.md, "Script mode"): the runner starts this with
 * MRC_ROLE=script and the script's header in MRC_* variables; it sets up one QP, its memory
 * region and its receive WQEs as the header says, prints one `ready` line with its QPN, VA and
 * rkey, then answers one JSON line per request on stdin (completions, read, post_write, stop).
 * What the MRC API cannot express (SACK coalescing thresholds, turning a device capability off)
 * is declined with `{"type":"unsupported","reason":...}` and exit code 69, never played wrong.
 *
 * Kept apart from mrc_perf.c: main() hands over here for MRC_ROLE=script and nothing is
 * shared but the process. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mrc.h"
#include "wc_status.h"

int mrc_perf_script_main(void);

enum { SS_EXIT_FAILED = 1, SS_EXIT_USAGE = 2, SS_EXIT_UNSUPPORTED = 69 };
enum { SS_MAX_WC = 4096, SS_MAX_SOURCES = 4096, SS_LINE = 1 << 16 };

/* The SACK coalescing the MRP0 proposal gives (C.4) and SoftMRC uses: the API has no setting
 * for it, so a script that assumes other values cannot run here. */
#define SS_ACK_TRIGGER_BYTES 16384u
#define SS_ACK_MIN_ADD_BYTES 1024u

static void say(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  putchar('\n');
  fflush(stdout);
}

static int fail_start(const char* fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  for (char* p = msg; *p; p++)
    if (*p == '"' || *p == '\\') *p = '\'';
  say("{\"type\":\"error\",\"message\":\"mrc-perf: %s\"}", msg);
  return SS_EXIT_FAILED;
}

static int unsupported(const char* why) {
  say("{\"type\":\"unsupported\",\"reason\":\"mrc-perf: %s\"}", why);
  return SS_EXIT_UNSUPPORTED;
}

/* A number from the environment in [lo, hi]; -1 with an error line when missing or wrong. */
static int env_u64(const char* name, uint64_t lo, uint64_t hi, uint64_t* out) {
  const char* v = getenv(name);
  char* end = NULL;
  errno = 0;
  unsigned long long x = v && *v ? strtoull(v, &end, 0) : 0;
  if (!v || !*v || errno || *end || x < lo || x > hi) {
    fail_start("%s='%s': expected a number %" PRIu64 "..%" PRIu64, name, v ? v : "", lo, hi);
    return -1;
  }
  *out = x;
  return 0;
}

/* Minimal JSON of the requests: "key":number and "key":"text" of one flat object. */
static const char* json_at(const char* obj, const char* key) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\"", key);
  const char* p = strstr(obj, pat);
  if (!p) return NULL;
  p += strlen(pat);
  while (*p == ' ' || *p == ':') p++;
  return p;
}

static int json_num(const char* obj, const char* key, uint64_t* out) {
  const char* p = json_at(obj, key);
  if (!p || *p < '0' || *p > '9') return -1;
  *out = strtoull(p, NULL, 10);
  return 0;
}

static void json_text(const char* obj, const char* key, char* out, size_t cap) {
  out[0] = '\0';
  const char* p = json_at(obj, key);
  if (!p || *p != '"') return;
  p++;
  size_t n = 0;
  while (*p && *p != '"' && n + 1 < cap) out[n++] = *p++;
  out[n] = '\0';
}

static const char* status_name(enum ibv_wc_status s) {
  const char* n = mrc_wc_status_name(s);
  return n ? n : "IBV_WC_OTHER";
}

static const char* opcode_name(enum ibv_wc_opcode op) {
  switch (op) {
    case IBV_WC_RDMA_WRITE:
      return "IBV_WC_RDMA_WRITE";
    case IBV_WC_RECV_RDMA_WITH_IMM:
      return "IBV_WC_RECV_RDMA_WITH_IMM";
    default:
      return "IBV_WC_OTHER";
  }
}

struct ss {
  struct ibv_context* vctx;
  struct mrc_context* ctx;
  struct ibv_pd* pd;
  struct mrc_cq* cq;
  struct mrc_qp* qp;
  struct ibv_mr* mr;
  uint8_t* mem;
  uint64_t mr_bytes;
  struct ibv_wc wc[SS_MAX_WC]; /* completions polled, not yet asked for */
  int nwc;
  struct ibv_mr* src_mr[SS_MAX_SOURCES]; /* sources of posted writes, kept for retransmission */
  int nsrc;
};

/* Completions are drained into our queue while we wait for requests, so a full CQ never loses
 * one. */
static void drain(struct ss* s) {
  while (s->nwc < SS_MAX_WC) {
    int n = mrc_poll_cq(s->cq, SS_MAX_WC - s->nwc > 64 ? 64 : SS_MAX_WC - s->nwc, s->wc + s->nwc);
    if (n <= 0) break;
    s->nwc += n;
  }
}

static int open_mrc_device(struct ss* s, const char* gid_text, int planes, int* gid_index,
                           uint32_t* device_cap) {
  int n = 0;
  struct ibv_device** list = ibv_get_device_list(&n);
  for (int i = 0; list && i < n && !s->vctx; i++) {
    struct ibv_context* c = ibv_open_device(list[i]);
    if (!c) continue;
    struct mrc_device_attr a;
    int supported = 0;
    if (mrc_query_device(c, &a, &supported) == 0 && supported) {
      s->vctx = c;
      *device_cap = a.cap;
    } else {
      ibv_close_device(c);
    }
  }
  if (list) ibv_free_device_list(list);
  if (!s->vctx) return fail_start("no MRC device (ibv_get_device_list, mrc_query_device)");
  struct ibv_device_attr da;
  if (ibv_query_device(s->vctx, &da)) return fail_start("ibv_query_device: %s", strerror(errno));
  if (da.phys_port_cnt != planes)
    return fail_start("the device has %d ports, the script %d planes (MRC_PLANES)",
                      da.phys_port_cnt, planes);
  struct in6_addr want;
  if (inet_pton(AF_INET6, gid_text, &want) != 1)
    return fail_start("MRC_GID='%s': not an IPv6 address", gid_text);
  union ibv_gid g;
  *gid_index = -1;
  for (int i = 0; i < 256 && ibv_query_gid(s->vctx, 1, i, &g) == 0; i++)
    if (!memcmp(g.raw, &want, 16)) *gid_index = i; /* the last one: RoCE v2 */
  if (*gid_index < 0) return fail_start("GID %s is not in port 1's GID table", gid_text);
  struct mrc_context_attr ca = {.mrc_api_version_used = MRC_API_CURRENT_VERSION};
  s->ctx = mrc_create_context(s->vctx, &ca);
  if (!s->ctx) return fail_start("mrc_create_context: %s", strerror(errno));
  s->pd = ibv_alloc_pd(s->vctx);
  if (!s->pd) return fail_start("ibv_alloc_pd: %s", strerror(errno));
  return 0;
}

static enum ibv_mtu ss_mtu(uint64_t b) {
  return b >= 4096   ? IBV_MTU_4096
         : b >= 2048 ? IBV_MTU_2048
         : b >= 1024 ? IBV_MTU_1024
         : b >= 512  ? IBV_MTU_512
                     : IBV_MTU_256;
}

static void answer_completions(struct ss* s) {
  drain(s);
  static char out[SS_MAX_WC * 200 + 64];
  size_t n = (size_t)snprintf(out, sizeof out, "{\"completions\":[");
  for (int i = 0; i < s->nwc; i++) {
    const struct ibv_wc* w = &s->wc[i];
    const int with_imm = (w->wc_flags & IBV_WC_WITH_IMM) != 0;
    n += (size_t)snprintf(out + n, sizeof out - n,
                          "%s{\"wr_id\":%" PRIu64
                          ",\"status\":\"%s\",\"opcode\":\"%s\",\"len\":%u,\"imm\":%u,"
                          "\"with_imm\":%s,\"qpn\":%u}",
                          i ? "," : "", (uint64_t)w->wr_id, status_name(w->status),
                          opcode_name(w->opcode), w->byte_len, with_imm ? ntohl(w->imm_data) : 0u,
                          with_imm ? "true" : "false", w->qp_num);
  }
  s->nwc = 0;
  snprintf(out + n, sizeof out - n, "]}");
  say("%s", out);
}

static void answer_read(struct ss* s, const char* req) {
  uint64_t va = 0, len = 0;
  const uint64_t base = (uint64_t)(uintptr_t)s->mem;
  if (json_num(req, "va", &va) || json_num(req, "len", &len)) {
    say("{\"error\":\"read: needs va and len\"}");
    return;
  }
  if (va < base || va - base > s->mr_bytes || len > s->mr_bytes - (va - base)) {
    say("{\"error\":\"memory range is outside the implementation's region\"}");
    return;
  }
  char* hex = malloc(len * 2 + 32);
  if (!hex) {
    say("{\"error\":\"out of memory\"}");
    return;
  }
  static const char k[] = "0123456789abcdef";
  const uint8_t* p = s->mem + (va - base);
  for (uint64_t i = 0; i < len; i++) {
    hex[2 * i] = k[p[i] >> 4];
    hex[2 * i + 1] = k[p[i] & 15];
  }
  hex[2 * len] = '\0';
  say("{\"hex\":\"%s\"}", hex);
  free(hex);
}

static void answer_post_write(struct ss* s, const char* req) {
  uint64_t wr_id = 0, len = 0, va = 0, rkey = 0, seed = 0, imm = 0;
  const int has_imm = json_num(req, "imm", &imm) == 0;
  if (json_num(req, "wr_id", &wr_id) || json_num(req, "len", &len) || json_num(req, "va", &va) ||
      json_num(req, "rkey", &rkey) || len > (1u << 30)) {
    say("{\"error\":\"post_write: needs wr_id, len (up to 2^30), va and rkey\"}");
    return;
  }
  json_num(req, "fill_seed", &seed);
  if (s->nsrc == SS_MAX_SOURCES) {
    say("{\"error\":\"post_write: more than %d writes\"}", SS_MAX_SOURCES);
    return;
  }
  /* Each WR has its own source, registered and kept: the library reads it again on
   * retransmission. */
  uint8_t* src = malloc(len ? len : 1);
  if (!src) {
    say("{\"error\":\"out of memory\"}");
    return;
  }
  for (uint64_t i = 0; i < len; i++) src[i] = (uint8_t)(seed + i);
  struct ibv_mr* mr = ibv_reg_mr(s->pd, src, len ? len : 1, IBV_ACCESS_LOCAL_WRITE);
  if (!mr) {
    free(src);
    say("{\"error\":\"ibv_reg_mr: %s\"}", strerror(errno));
    return;
  }
  s->src_mr[s->nsrc++] = mr;
  struct ibv_sge sge = {.addr = (uintptr_t)src, .length = (uint32_t)len, .lkey = mr->lkey};
  struct ibv_send_wr wr, *bad = NULL;
  memset(&wr, 0, sizeof wr);
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = has_imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = htonl((uint32_t)imm);
  wr.wr.rdma.remote_addr = va;
  wr.wr.rdma.rkey = (uint32_t)rkey;
  const int rc = mrc_post_send(s->qp, &wr, &bad);
  if (rc) {
    say("{\"error\":\"mrc_post_send: %s\"}", strerror(rc));
    return;
  }
  say("{\"ok\":true}");
}

int mrc_perf_script_main(void) {
  uint64_t planes, pmtu, mr_bytes, mr_fill, peer_qpn, rq_psn, sq_psn, mpr, dyn, wimm, timeout,
      recv_wqes, svc, trim, trig, min_add;
  if (env_u64("MRC_PLANES", 1, 4, &planes) || env_u64("MRC_PMTU", 256, 4096, &pmtu) ||
      env_u64("MRC_MR_BYTES", 1, 1u << 26, &mr_bytes) || env_u64("MRC_MR_FILL", 0, 255, &mr_fill) ||
      env_u64("MRC_PEER_QPN", 0, 0xFFFFFF, &peer_qpn) ||
      env_u64("MRC_RQ_PSN", 0, 0xFFFFFF, &rq_psn) || env_u64("MRC_SQ_PSN", 0, 0xFFFFFF, &sq_psn) ||
      env_u64("MRC_MPR", 1, 255, &mpr) || env_u64("MRC_DYNAMIC_MPR", 0, 1, &dyn) ||
      env_u64("MRC_WIMM", 0, 65535, &wimm) || env_u64("MRC_TIMEOUT", 0, 31, &timeout) ||
      env_u64("MRC_RECV_WQES", 0, 4096, &recv_wqes) || env_u64("MRC_SVC_TIME", 0, 1, &svc) ||
      env_u64("MRC_TRIM_NACK", 0, 1, &trim) ||
      env_u64("MRC_ACK_TRIGGER_BYTES", 1, 1u << 30, &trig) ||
      env_u64("MRC_ACK_MIN_ADD_BYTES", 0, 1u << 30, &min_add))
    return SS_EXIT_USAGE;
  unsigned lin = 0, ex = 0;
  const char* retry = getenv("MRC_RETRY");
  if (!retry || sscanf(retry, "%u:%u", &lin, &ex) != 2 || lin > 7 || ex > 25) {
    fail_start("MRC_RETRY='%s': expected LINEAR:EXP", retry ? retry : "");
    return SS_EXIT_USAGE;
  }
  const char* peer_gid = getenv("MRC_PEER_GID");
  const char* gid = getenv("MRC_GID");
  struct in6_addr pg;
  if (!peer_gid || inet_pton(AF_INET6, peer_gid, &pg) != 1) {
    fail_start("MRC_PEER_GID='%s': not an IPv6 address", peer_gid ? peer_gid : "");
    return SS_EXIT_USAGE;
  }
  if (trig != SS_ACK_TRIGGER_BYTES || min_add != SS_ACK_MIN_ADD_BYTES)
    return unsupported(
        "SACK coalescing other than 16384/1024 bytes (MRC_ACK_TRIGGER_BYTES, "
        "MRC_ACK_MIN_ADD_BYTES): the MRC API has no setting for it");

  struct ss* s = calloc(1, sizeof *s);
  int gid_index = 0;
  uint32_t dev_cap = 0;
  if (!s || open_mrc_device(s, gid ? gid : "", (int)planes, &gid_index, &dev_cap))
    return SS_EXIT_FAILED;
  /* Device capabilities are the device's: a script that needs one off (or on) that the device
   * has on (or off) cannot be played here. */
  if (!!(dev_cap & MRC_DEVICE_CAP_SVC_TIME) != (svc != 0))
    return unsupported(svc ? "the device does not report service time (MRC_SVC_TIME=1)"
                           : "the MRC API cannot turn the device's service-time reporting off "
                             "(MRC_SVC_TIME=0)");
  if (!!(dev_cap & MRC_DEVICE_CAP_TRIM_NACK) != (trim != 0))
    return unsupported(trim ? "the device does not NACK trimmed packets (MRC_TRIM_NACK=1)"
                            : "the MRC API cannot turn the device's trim NACKs off "
                              "(MRC_TRIM_NACK=0)");
  if (dyn && !(dev_cap & MRC_DEVICE_CAP_DYNAMIC_MPR))
    return unsupported("the device has no dynamic MPR (MRC_DYNAMIC_MPR=1)");

  s->cq = mrc_create_cq(s->ctx, SS_MAX_WC, NULL, NULL, 0);
  if (!s->cq) return fail_start("mrc_create_cq: %s", strerror(errno));
  struct mrc_qp_init_attr qia = {
      .send_cq = s->cq,
      .recv_cq = s->cq,
      .cap = {.max_send_wr = 256, .max_recv_wr = 256, .max_send_sge = 1, .max_recv_sge = 1},
      .pd = s->pd,
      .send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM,
      .protocol_version = MRC_PROTOCOL_VERSION_1};
  s->qp = mrc_create_qp(s->ctx, &qia);
  if (!s->qp) return fail_start("mrc_create_qp: %s", strerror(errno));
  s->mr_bytes = mr_bytes;
  s->mem = aligned_alloc(4096, (mr_bytes + 4095) / 4096 * 4096);
  if (!s->mem) return fail_start("out of memory (%" PRIu64 " bytes)", mr_bytes);
  memset(s->mem, (int)mr_fill, mr_bytes);
  s->mr = ibv_reg_mr(s->pd, s->mem, mr_bytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (!s->mr) return fail_start("ibv_reg_mr: %s", strerror(errno));

  /* RESET -> INIT with the device's default EV and CC profiles, the receive WQEs, RTR, RTS. */
  struct ibv_qp_attr v = {.qp_state = IBV_QPS_INIT,
                          .qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE};
  if (mrc_modify_qp(s->qp, &v, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS, NULL, 0))
    return fail_start("QP to INIT: %s", strerror(errno));
  for (uint64_t i = 0; i < recv_wqes; i++) {
    struct ibv_recv_wr rw = {.wr_id = 1000 + i}, *bad = NULL;
    if (mrc_post_recv(s->qp, &rw, &bad)) return fail_start("mrc_post_recv: %s", strerror(errno));
  }
  memset(&v, 0, sizeof v);
  v.qp_state = IBV_QPS_RTR;
  v.path_mtu = ss_mtu(pmtu);
  v.ah_attr.is_global = 1;
  v.ah_attr.port_num = 1;
  v.ah_attr.grh.sgid_index = (uint8_t)gid_index;
  memcpy(v.ah_attr.grh.dgid.raw, &pg, 16);
  v.dest_qp_num = (uint32_t)peer_qpn;
  v.rq_psn = (uint32_t)rq_psn;
  struct mrc_qp_attr m;
  memset(&m, 0, sizeof m);
  m.mpr.mpr_dest = (uint8_t)mpr;
  m.wimm.max_wimm_dest = (uint16_t)wimm;
  m.cap = dyn ? MRC_QP_CAP_DYNAMIC_MPR : 0;
  if (mrc_modify_qp(s->qp, &v,
                    IBV_QP_STATE | IBV_QP_AV | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_PATH_MTU,
                    &m, MRC_QP_MPR_DEST | MRC_QP_MAX_WIMM_DEST | MRC_QP_CAP))
    return fail_start("QP to RTR: %s", strerror(errno));
  memset(&v, 0, sizeof v);
  v.qp_state = IBV_QPS_RTS;
  v.sq_psn = (uint32_t)sq_psn;
  memset(&m, 0, sizeof m);
  m.mpr.mpr = (uint8_t)mpr;
  m.wimm.max_wimm = (uint16_t)wimm;
  m.timeout = (uint8_t)timeout;
  m.retry.linear_cnt = (uint8_t)lin;
  m.retry.exp_cnt = (uint8_t)ex;
  if (mrc_modify_qp(s->qp, &v, IBV_QP_STATE | IBV_QP_SQ_PSN, &m,
                    MRC_QP_MPR | MRC_QP_MAX_WIMM | MRC_QP_TIMEOUT | MRC_QP_RETRY_CNT))
    return fail_start("QP to RTS: %s", strerror(errno));
  uint32_t qpn = 0;
  if (mrc_get_qpn(s->qp, &qpn)) return fail_start("mrc_get_qpn: %s", strerror(errno));
  say("{\"type\":\"ready\",\"vars\":{\"dut_qpn\":%u,\"va\":%" PRIu64 ",\"rkey\":%u}}", qpn,
      (uint64_t)(uintptr_t)s->mem, s->mr->rkey);

  /* Requests, one line each; completions are drained while we wait. */
  static char line[SS_LINE];
  size_t have = 0;
  for (;;) {
    char* nl = memchr(line, '\n', have);
    if (!nl) {
      if (have == sizeof line) return fail_start("a request longer than %d bytes", SS_LINE);
      struct pollfd pfd = {.fd = 0, .events = POLLIN};
      if (poll(&pfd, 1, 1) <= 0) {
        drain(s);
        continue;
      }
      const ssize_t got = read(0, line + have, sizeof line - have);
      if (got <= 0) break; /* the runner is gone */
      have += (size_t)got;
      continue;
    }
    *nl = '\0';
    char op[32];
    json_text(line, "op", op, sizeof op);
    if (!strcmp(op, "stop")) break;
    if (!strcmp(op, "completions"))
      answer_completions(s);
    else if (!strcmp(op, "read"))
      answer_read(s, line);
    else if (!strcmp(op, "post_write"))
      answer_post_write(s, line);
    else
      say("{\"error\":\"unknown request '%s'\"}", op);
    const size_t used = (size_t)(nl - line) + 1;
    memmove(line, nl + 1, have - used);
    have -= used;
  }
  return 0;
}
