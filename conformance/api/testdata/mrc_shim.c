/* A deliberately broken lib_mrc.so for the API suite's own test: it wraps the reference library
 * (linked as a dependency; every call it does not wrap goes straight there) and breaks exactly
 * one behaviour, chosen by MRC_SHIM_BREAK. The suite must catch each breakage with its own
 * test ID(s) only (api_suite_mutants_test.sh). Unset or unknown: a faithful pass-through. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <mrc.h>
#include <mrc_ctl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int breaks(const char* what) {
  const char* b = getenv("MRC_SHIM_BREAK");
  return b && strcmp(b, what) == 0;
}

#define REAL(name) ((__typeof__(&name))dlsym(RTLD_NEXT, #name))

/* The device of the last context, for the mutants that need its limits. */
static struct ibv_context* g_vctx;
struct mrc_context* mrc_create_context(struct ibv_context* context, struct mrc_context_attr* attr) {
  g_vctx = context;
  return REAL(mrc_create_context)(context, attr);
}

/* wrong errno: EINVAL where mrc.h says EBUSY. */
int mrc_destroy_context(struct mrc_context* ctx) {
  int rc = REAL(mrc_destroy_context)(ctx);
  if (rc != 0 && errno == EBUSY && breaks("busy_errno")) errno = EINVAL;
  return rc;
}

/* accepting READ: claims to have posted it. */
int mrc_post_send(struct mrc_qp* qp, struct ibv_send_wr* wr, struct ibv_send_wr** bad_wr) {
  if (breaks("accept_read") && wr && wr->opcode == IBV_WR_RDMA_READ && !wr->next) return 0;
  /* a large WRITE loses its last byte (a length off by one past 1 MiB). */
  if (breaks("trunc_1m"))
    for (struct ibv_send_wr* w = wr; w; w = w->next)
      if (w->opcode == IBV_WR_RDMA_WRITE && w->num_sge == 1 && w->sg_list[0].length >= (1u << 20))
        w->sg_list[0].length -= 1;
  return REAL(mrc_post_send)(qp, wr, bad_wr);
}

static __typeof__(((struct mrc_qp_attr*)0)->retry) g_retry_set; /* what no_retries was asked for */

int mrc_query_qp(struct mrc_qp* qp, struct ibv_qp_attr* vattr, int vattr_mask,
                 struct mrc_qp_attr* mrc_attr, int mrc_attr_mask, struct mrc_qp_init_attr* init) {
  int rc = REAL(mrc_query_qp)(qp, vattr, vattr_mask, mrc_attr, mrc_attr_mask, init);
  if (rc == 0 && breaks("no_retries") && mrc_attr && (mrc_attr_mask & MRC_QP_RETRY_CNT))
    mrc_attr->retry = g_retry_set;
  return rc;
}

int mrc_modify_qp(struct mrc_qp* qp, struct ibv_qp_attr* vattr, int vattr_mask,
                  struct mrc_qp_attr* mrc_attr, int mrc_attr_mask) {
  /* missing state check: RESET -> RTR "succeeds" (and does nothing). */
  if (breaks("no_state_check") && vattr && (vattr_mask & IBV_QP_STATE) &&
      vattr->qp_state == IBV_QPS_RTR) {
    struct ibv_qp_attr cur;
    memset(&cur, 0, sizeof cur);
    if (REAL(mrc_query_qp)(qp, &cur, IBV_QP_STATE, NULL, 0, NULL) == 0 &&
        cur.qp_state == IBV_QPS_RESET)
      return 0;
  }
  struct mrc_qp_attr copy;
  if (mrc_attr) {
    copy = *mrc_attr;
    /* the configured retries ignored (none made), though they read back as set. */
    if (breaks("no_retries") && (mrc_attr_mask & MRC_QP_RETRY_CNT) && copy.retry.linear_cnt <= 7 &&
        copy.retry.exp_cnt <= 25) {
      g_retry_set = copy.retry;
      copy.retry.linear_cnt = 0;
      copy.retry.exp_cnt = 0;
    }
    /* ignoring the maximum timeout: clamped to 24 instead of refused. */
    if (breaks("max_timeout") && (mrc_attr_mask & MRC_QP_TIMEOUT) && copy.timeout > 24)
      copy.timeout = 24;
    /* ignoring max_wimm: above the device max clamped instead of refused. */
    if (breaks("ignore_max_wimm") && (mrc_attr_mask & MRC_QP_MAX_WIMM)) {
      struct mrc_device_attr d;
      int supported = 0;
      memset(&d, 0, sizeof d);
      if (g_vctx && REAL(mrc_query_device)(g_vctx, &d, &supported) == 0 &&
          copy.wimm.max_wimm > d.wimm_attr.max_wimm)
        copy.wimm.max_wimm = d.wimm_attr.max_wimm;
    }
    /* ignoring the retry ranges. */
    if (breaks("retry_range") && (mrc_attr_mask & MRC_QP_RETRY_CNT)) {
      if (copy.retry.linear_cnt > 7) copy.retry.linear_cnt = 7;
      if (copy.retry.exp_cnt > 25) copy.retry.exp_cnt = 25;
    }
    mrc_attr = &copy;
  }
  return REAL(mrc_modify_qp)(qp, vattr, vattr_mask, mrc_attr, mrc_attr_mask);
}

/* an optional feature not advertised: must read `unsupported`, never `fail`. */
int mrc_ctl_query_device(struct ibv_context* context, struct mrc_ctl_device_attr* attr) {
  int rc = REAL(mrc_ctl_query_device)(context, attr);
  if (rc == 0 && breaks("hide_ev_event")) attr->opt_attr &= ~(uint32_t)MRC_CTL_OPT_CAP_EV_EVENT;
  return rc;
}
int mrc_ctl_query_device_ex(struct ibv_context* context, struct mrc_context* mcontext,
                            struct mrc_ctl_device_attr* attr, int* supported) {
  int rc = REAL(mrc_ctl_query_device_ex)(context, mcontext, attr, supported);
  if (rc == 0 && breaks("hide_ev_event")) attr->opt_attr &= ~(uint32_t)MRC_CTL_OPT_CAP_EV_EVENT;
  return rc;
}

/* a crash in the library: one failed test per caller, not a dead suite. */
int mrc_poll_cq(struct mrc_cq* cq, int num_entries, struct ibv_wc* wc) {
  if (breaks("crash")) raise(SIGSEGV);
  int n = REAL(mrc_poll_cq)(cq, num_entries, wc);
  /* out of order: the process's 20th WRITE completion held back behind the next one of its
   * QP. */
  static struct ibv_wc held;
  static int holding, write_oks;
  for (int i = 0; breaks("late_completion") && i < n; i++) {
    if (wc[i].status != IBV_WC_SUCCESS || wc[i].opcode != IBV_WC_RDMA_WRITE) continue;
    if (holding && wc[i].qp_num == held.qp_num) {
      if (n < num_entries) {
        memmove(&wc[i + 2], &wc[i + 1], sizeof *wc * (size_t)(n - i - 1));
        wc[i + 1] = held;
        n++;
        i++;
        holding = 0;
      }
    } else if (!holding && ++write_oks == 20) {
      held = wc[i];
      holding = 1;
      memmove(&wc[i], &wc[i + 1], sizeof *wc * (size_t)(n - i - 1));
      n--;
      i--;
    }
  }
  static int imm_recvs; /* receive completions with immediate seen by this (test) process */
  for (int i = 0; i < n; i++) {
    if (wc[i].status != IBV_WC_SUCCESS || wc[i].opcode != IBV_WC_RECV_RDMA_WITH_IMM) continue;
    /* a completion with the wrong byte_len */
    if (breaks("wrong_byte_len")) wc[i].byte_len += 1;
    /* byte_len kept in 16 bits: wrong past 64 KiB */
    if (breaks("byte_len_16bit")) wc[i].byte_len &= 0xFFFF;
    /* an immediate lost: the sixth receive completion of the process is never reported */
    if (breaks("lose_sixth_imm") && ++imm_recvs == 6) {
      memmove(&wc[i], &wc[i + 1], sizeof *wc * (size_t)(n - i - 1));
      n--;
      i--;
    }
  }
  return n;
}

/* CQ overrun not reported: IBV_EVENT_CQ_ERR is acknowledged and swallowed. */
int mrc_get_async_event(struct mrc_context* ctx, struct mrc_async_event* event) {
  int rc = REAL(mrc_get_async_event)(ctx, event);
  if (rc == 0 && breaks("no_cq_err") && event->event_type == IBV_EVENT_CQ_ERR) {
    REAL(mrc_ack_async_event)(event);
    errno = EAGAIN;
    return -1;
  }
  return rc;
}

/* controller calls without CAP_NET_ADMIN "succeed" (the EPERM check missing). */
int mrc_ctl_modify_cc_profile(struct mrc_context* ctx, uint64_t id,
                              struct mrc_ctl_cc_profile_attr* attr, int attr_mask) {
  int rc = REAL(mrc_ctl_modify_cc_profile)(ctx, id, attr, attr_mask);
  if (rc != 0 && errno == EPERM && breaks("no_eperm")) return 0;
  return rc;
}

/* EV events never delivered: the EV event CQ always polls empty. */
int mrc_ctl_poll_ev_event(struct mrc_cq* cq, int num_entries, struct mrc_ctl_ev_event* events) {
  if (breaks("no_ev_event")) return 0;
  return REAL(mrc_ctl_poll_ev_event)(cq, num_entries, events);
}

/* an endpoint probe response lost: one response fewer than arrived. */
int mrc_ctl_ep_batch_send_wait(struct mrc_context* ctx, uint8_t req_tc,
                               enum mrc_ctl_ep_op_type op_type, struct mrc_ctl_ep_req* req,
                               int num_req, uint32_t rsp_timeout, struct mrc_ctl_ep_rsp* rsp,
                               int* num_rsp) {
  int rc = REAL(mrc_ctl_ep_batch_send_wait)(ctx, req_tc, op_type, req, num_req, rsp_timeout, rsp,
                                            num_rsp);
  if (rc == 0 && breaks("probe_lost") && num_rsp && *num_rsp > 0) --*num_rsp;
  return rc;
}

/* a hang in the library: bounded by the suite's per-test timeout. */
struct mrc_qp_hint* mrc_create_qp_hint(struct mrc_context* ctx,
                                       struct mrc_qp_hint_init_attr* init_attr) {
  if (breaks("hang"))
    for (;;) pause();
  return REAL(mrc_create_qp_hint)(ctx, init_attr);
}

/* memory registration: ibv_reg_mr is a macro over an inline wrapper in <infiniband/verbs.h>;
 * the exported function is wrapped. */
#undef ibv_reg_mr
struct ibv_mr* ibv_reg_mr(struct ibv_pd* pd, void* addr, size_t length, int access) {
  /* remote write granted although not asked for */
  if (breaks("mr_remote_write")) access |= IBV_ACCESS_REMOTE_WRITE;
  /* the MR reaches past the registered length (a length check off by the buffer's size) */
  if (breaks("mr_oversize")) length *= 2;
  return REAL(ibv_reg_mr)(pd, addr, length, access);
}

/* deregistration that leaves the rkey valid */
int ibv_dereg_mr(struct ibv_mr* mr) {
  if (breaks("dereg_noop")) return 0;
  return REAL(ibv_dereg_mr)(mr);
}
