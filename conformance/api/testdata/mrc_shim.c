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

/* wrong errno: EINVAL where mrc.h says EBUSY. */
int mrc_destroy_context(struct mrc_context* ctx) {
  int rc = REAL(mrc_destroy_context)(ctx);
  if (rc != 0 && errno == EBUSY && breaks("busy_errno")) errno = EINVAL;
  return rc;
}

/* accepting READ: claims to have posted it. */
int mrc_post_send(struct mrc_qp* qp, struct ibv_send_wr* wr, struct ibv_send_wr** bad_wr) {
  if (breaks("accept_read") && wr && wr->opcode == IBV_WR_RDMA_READ && !wr->next) return 0;
  return REAL(mrc_post_send)(qp, wr, bad_wr);
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
    /* ignoring the maximum timeout: clamped to 24 instead of refused. */
    if (breaks("max_timeout") && (mrc_attr_mask & MRC_QP_TIMEOUT) && copy.timeout > 24)
      copy.timeout = 24;
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
  return REAL(mrc_poll_cq)(cq, num_entries, wc);
}

/* a hang in the library: bounded by the suite's per-test timeout. */
struct mrc_qp_hint* mrc_create_qp_hint(struct mrc_context* ctx,
                                       struct mrc_qp_hint_init_attr* init_attr) {
  if (breaks("hang"))
    for (;;) pause();
  return REAL(mrc_create_qp_hint)(ctx, init_attr);
}
