/* mrc.h: the MRC application API as SoftMRC (lib_mrc.so) implements it.
 *
 * MRC queue pairs are created, moved through their states and posted to through this API; the
 * device, protection domains and memory regions stay libibverbs objects (ibv_open_device,
 * ibv_alloc_pd, ibv_reg_mr). Calls return 0 / a pointer on success and -1 / NULL with errno set
 * on failure unless a comment says otherwise.
 *
 * The function names, types, constants, enum values and structure layouts are those the OCP
 * MRC companion repository documents, so that an application written for that header compiles
 * against this one unchanged. The comments are ours and describe what this implementation
 * does; reference-impl/provider/README.md lists what it does not do yet.
 */
#ifndef _MRC_API_H_
#define _MRC_API_H_

#include <infiniband/verbs.h>
#include <mrc_api_ver.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Size of every opaque vendor configuration blob in this API. */
#define MRC_MAX_VENDOR_CFG_SIZE 128

/* Wire protocol versions. A device reports the set it speaks as a bit mask; a QP asks for one
 * bit, or 0 for the provider's default (SoftMRC: MRP0, reported as version 1). */
enum mrc_protocol_version {
  MRC_PROTOCOL_VERSION_0 = 0,
  MRC_PROTOCOL_VERSION_1 = 1 << 0,
};

struct mrc_context;
struct mrc_qp_hint;
struct mrc_qp;
struct mrc_cq;
struct mrc_comp_channel;

/* Optional device features (mrc_device_attr.cap). */
enum mrc_device_cap {
  MRC_DEVICE_CAP_TRIM_NACK = 1 << 0,   /* the responder NACKs trimmed packets */
  MRC_DEVICE_CAP_DYNAMIC_MPR = 1 << 1, /* the responder can shrink its MPR at run time */
  MRC_DEVICE_CAP_SVC_TIME = 1 << 2,    /* the responder reports its service time */
};

struct mrc_device_attr {
  uint32_t mrc_protocol_version; /* mask of enum mrc_protocol_version; 0 = provider picks */
  struct {
    uint16_t max_wimm;      /* largest max_wimm a QP may ask for (requester) */
    uint16_t max_wimm_dest; /* largest max_wimm_dest (responder) */
  } wimm_attr;
  struct {
    uint8_t max_mpr;        /* largest MPR, in units of 128 PSNs */
    uint8_t mpr_resolution; /* MPR granularity, in units of 128 PSNs */
  } mpr_attr;
  struct {
    uint32_t max_qp_hint; /* QP hints a context may hold */
  } qp_attr;
  uint32_t cap; /* mask of enum mrc_device_cap */
};

/* Device query. `supported` is set non-zero when the verbs device is an MRC device.
 * mrc_query_device() answers with API 1.0.0 semantics; from 1.0.1 on applications pass their
 * MRC context too (mrc_query_device_ex). */
#if MRC_API_VER_USED >= MRC_API_VER(1, 0, 1)
int mrc_query_device_ex(struct ibv_context* context, struct mrc_context* mcontext,
                        struct mrc_device_attr* attr, int* supported);
#endif
int mrc_query_device(struct ibv_context* context, struct mrc_device_attr* attr, int* supported);

/* The API versions the library implements (current and oldest) and the same for its vendor
 * API. Any pointer may be NULL. Callable before any context exists. */
void mrc_query_version(uint32_t* current_version, uint32_t* last_supported_version,
                       uint32_t* vendor_version, uint32_t* last_supported_vendor_version);

/* What the application tells mrc_create_context(); 0 in a field means "not said". */
struct mrc_context_attr {
  uint32_t mrc_api_version_used;
  uint32_t mrc_vendor_api_version_used;
};

/* An MRC context on an opened verbs device: the parent of every other MRC object of the
 * application. `context_attr` may be NULL. A version outside what mrc_query_version() reports
 * fails with ENOTSUP. */
struct mrc_context* mrc_create_context(struct ibv_context* vcontext,
                                       struct mrc_context_attr* context_attr);
/* Fails with EBUSY while QPs, CQs, hints or channels of the context exist. */
int mrc_destroy_context(struct mrc_context* mrc_ctx);

/* Completion channels: a file descriptor that becomes readable when an armed CQ gets a
 * completion (mrc_req_notify_cq, mrc_get_cq_event). */
int mrc_create_comp_channel(struct mrc_context* mrc_ctx, struct mrc_comp_channel** channel);
int mrc_get_comp_channel_fd(struct mrc_comp_channel* channel, int* fd);
int mrc_destroy_comp_channel(struct mrc_comp_channel* channel);

/* Completion queues. `cqe` is the least number of entries; `channel` may be NULL. */
struct mrc_cq* mrc_create_cq(struct mrc_context* mrc_ctx, int cqe, void* cq_context,
                             struct mrc_comp_channel* channel, int comp_vector);
/* Returns the number of completions written to `wc` (fewer than num_entries: the CQ is now
 * empty), or -1. Completions have opcode IBV_WC_RDMA_WRITE (requester) or
 * IBV_WC_RECV_RDMA_WITH_IMM (responder, imm_data in network order as in verbs). */
int mrc_poll_cq(struct mrc_cq* cq, int num_entries, struct ibv_wc* wc);
int mrc_destroy_cq(struct mrc_cq* cq);

/* QP hints: the traffic pattern a set of QPs expects, advisory only. */
struct mrc_qp_hint_attr {
  int num_qps_per_peer;      /* QPs of the hint sending to one peer address at once */
  int num_send_peers;        /* peer addresses the hint's QPs send to at once */
  int num_remote_recv_peers; /* remote QPs sending to one peer at once (incast degree) */
  uint8_t vendor_cfg[MRC_MAX_VENDOR_CFG_SIZE];
};

enum mrc_qp_hint_attr_mask {
  MRC_QP_HINT_NUM_QPS_PER_PEER = 1 << 0,
  MRC_QP_HINT_NUM_SEND_PEERS = 1 << 1,
  MRC_QP_HINT_NUM_REMOTE_RECV_PEERS = 1 << 2,
  MRC_QP_HINT_VENDOR_CFG = 1 << 31
};

struct mrc_qp_hint_init_attr {
  struct mrc_qp_hint_attr attr;
};

struct mrc_qp_hint* mrc_create_qp_hint(struct mrc_context* mrc_ctx,
                                       struct mrc_qp_hint_init_attr* init_attr);
/* EBUSY while a QP refers to the hint. */
int mrc_destroy_qp_hint(struct mrc_qp_hint* qp_hint);
int mrc_query_qp_hint(struct mrc_qp_hint* qp_hint, struct mrc_qp_hint_attr* qp_hint_attr,
                      int qp_hint_attr_mask);
int mrc_modify_qp_hint(struct mrc_qp_hint* qp_hint, struct mrc_qp_hint_attr* qp_hint_attr,
                       int qp_hint_attr_mask);

struct mrc_qp_init_attr {
  void* qp_context;
  struct mrc_cq* send_cq;
  struct mrc_cq* recv_cq;
  struct ibv_qp_cap cap;
  int sq_sig_all;
  struct ibv_pd* pd;
  uint64_t send_ops_flags;                    /* enum ibv_qp_create_send_ops_flags */
  enum mrc_protocol_version protocol_version; /* one bit, or 0 for the default */
};

struct mrc_qp* mrc_create_qp(struct mrc_context* mrc_ctx, struct mrc_qp_init_attr* mrc_qp_attr);
int mrc_destroy_qp(struct mrc_qp* qp);

/* MRC attributes of mrc_modify_qp()/mrc_query_qp(). The MRC attributes a transition requires:
 *   to INIT: MRC_QP_HINT, MRC_QP_EV_PROFILE_ID, MRC_QP_CC_PROFILE_ID
 *   to RTR:  MRC_QP_MAX_WIMM_DEST, MRC_QP_MPR_DEST (and the dynamic-MPR capability)
 *   to RTS:  MRC_QP_MAX_WIMM, MRC_QP_MPR, MRC_QP_RETRY_CNT, MRC_QP_TIMEOUT
 * SoftMRC fills any of them left out with the device default (README.md says which). */
enum mrc_qp_attr_mask {
  MRC_QP_MAX_WIMM = 1 << 0,
  MRC_QP_MAX_WIMM_DEST = 1 << 1,
  MRC_QP_MPR = 1 << 2,
  MRC_QP_MPR_DEST = 1 << 3,
  MRC_QP_TIMEOUT = 1 << 4,
  MRC_QP_EV_PROFILE_ID = 1 << 5,
  MRC_QP_CC_PROFILE_ID = 1 << 6,
  MRC_QP_HINT = 1 << 7,
  MRC_QP_RETRY_CNT = 1 << 8,
  MRC_QP_CAP = 1 << 9,
  MRC_QP_VENDOR_CFG = 1 << 31
};

/* Per-QP capability bits (mrc_qp_attr.cap). */
enum mrc_qp_cap {
  MRC_QP_CAP_TRIM_NACK_DEST_UNSUPPORTED = 1 << 0, /* the peer's responder cannot NACK trims */
  MRC_QP_CAP_DYNAMIC_MPR = 1 << 1,                /* dynamic MPR, both roles */
  MRC_QP_CAP_SVC_TIME_DEST_UNSUPPORTED = 1 << 2,  /* the peer reports no service time */
};

struct mrc_qp_attr {
  struct {
    uint8_t mpr;      /* requester MPR, 128-PSN units */
    uint8_t mpr_dest; /* responder MPR, 128-PSN units */
  } mpr;
  struct {
    uint16_t max_wimm;      /* WRITE_WITH_IMM in flight as requester */
    uint16_t max_wimm_dest; /* WRITE_WITH_IMM in flight as responder */
  } wimm;
  uint8_t timeout; /* local ACK timeout 1.024 us * 2^timeout, at most 24 */
  /* Profiles a controller created (mrc_ctl.h); the ids reach the application out of band. */
  struct {
    uint64_t ev_profile_id;
    uint64_t cc_profile_id;
  } profile;
  struct {
    uint8_t linear_cnt; /* fixed-interval retries, at most 7 */
    uint8_t exp_cnt;    /* exponential-backoff retries, at most 25 (25 = for ever) */
  } retry;
  struct mrc_qp_hint* qp_hint; /* NULL: no hint */
  uint32_t cap;                /* mask of enum mrc_qp_cap */
  uint8_t vendor_cfg[MRC_MAX_VENDOR_CFG_SIZE];
};

/* Any of vattr, mrc_attr and init_attr may be NULL when its mask asks for nothing. */
int mrc_query_qp(struct mrc_qp* qp, struct ibv_qp_attr* vattr, int vattr_mask,
                 struct mrc_qp_attr* mrc_attr, int mrc_attr_mask,
                 struct mrc_qp_init_attr* init_attr);

/* State changes RESET -> INIT -> RTR -> RTS, any -> ERR, any -> RESET, with the verbs
 * attributes of an RC QP (IBV_QP_STATE, IBV_QP_CUR_STATE, IBV_QP_ACCESS_FLAGS,
 * IBV_QP_PKEY_INDEX, IBV_QP_AV, IBV_QP_PATH_MTU, IBV_QP_DEST_QPN, IBV_QP_RQ_PSN,
 * IBV_QP_SQ_PSN) and the MRC ones above. The verbs attributes MRC replaces or does not have
 * (IBV_QP_PORT, IBV_QP_TIMEOUT, IBV_QP_RETRY_CNT, IBV_QP_RNR_RETRY, IBV_QP_MIN_RNR_TIMER,
 * IBV_QP_MAX_QP_RD_ATOMIC, IBV_QP_MAX_DEST_RD_ATOMIC, IBV_QP_ALT_PATH, IBV_QP_PATH_MIG_STATE)
 * are accepted and ignored, as the OCP examples set several of them (README.md explains). The
 * source GID of IBV_QP_AV is the device's GID at ah_attr.grh.sgid_index. */
int mrc_modify_qp(struct mrc_qp* qp, struct ibv_qp_attr* vattr, int vattr_mask,
                  struct mrc_qp_attr* mrc_attr, int mrc_attr_mask);

int mrc_get_qpn(struct mrc_qp* qp, uint32_t* qpn);

/* Receive WQEs consumed by incoming RDMA WRITE with immediate (no data lands in them; zero
 * SGEs is fine). Semantics of ibv_post_recv(): returns 0 or an errno value, *bad_wr set. */
int mrc_post_recv(struct mrc_qp* qp, struct ibv_recv_wr* wr, struct ibv_recv_wr** bad_wr);

/* RDMA WRITE and RDMA WRITE with immediate; any other opcode fails with EINVAL and *bad_wr.
 * Semantics of ibv_post_send(): returns 0 or an errno value. */
int mrc_post_send(struct mrc_qp* qp, struct ibv_send_wr* wr, struct ibv_send_wr** bad_wr);

struct mrc_async_event {
  union {
    struct mrc_cq* cq;
    struct mrc_qp* qp;
    int port_num;
  } element;
  enum ibv_event_type event_type;
};

/* Blocks until the context has an asynchronous event (make the descriptor non-blocking to
 * poll: see README.md). Every event must be acknowledged. */
int mrc_get_async_event(struct mrc_context* mrc_ctx, struct mrc_async_event* event);
void mrc_ack_async_event(struct mrc_async_event* event);

/* Arms the CQ: its next completion makes the CQ's channel readable once. */
int mrc_req_notify_cq(struct mrc_cq* cq, int solicited_only);
/* Blocks until a CQ of the channel had a completion after being armed. */
int mrc_get_cq_event(struct mrc_comp_channel* channel, struct mrc_cq** cq, void** cq_context);
/* mrc_destroy_cq() waits for every event taken with mrc_get_cq_event() to be acknowledged. */
void mrc_ack_cq_events(struct mrc_cq* cq, unsigned int nevents);

#ifdef __cplusplus
}
#endif

#endif /* _MRC_API_H_ */
