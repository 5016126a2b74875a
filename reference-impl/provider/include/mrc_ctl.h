/* mrc_ctl.h: the MRC controller API as SoftMRC (lib_mrc.so) implements it.
 *
 * The node's network controller uses it to describe paths (EV format profiles, EV profiles),
 * congestion control (CC profiles), to watch and steer EV states (EV events, DENIED), to probe
 * paths (endpoint operations) and to administer ports. Every call needs CAP_NET_ADMIN in the
 * calling process and fails with EPERM without it. Calls return 0 on success and -1 with errno
 * set on failure unless a comment says otherwise.
 *
 * Profile state machine, shared by the three profile kinds:
 *   INIT -> OFFLINE -> ONLINE -> OFFLINE -> INIT
 * A profile id first used by a modify call is created in INIT. OFFLINE profiles are configured;
 * only ONLINE ones may be named by a QP, and a profile some QP uses cannot leave ONLINE (EBUSY).
 *
 * The function names, types, constants, enum values and structure layouts are those the OCP
 * MRC companion repository documents, so that a controller written for that header compiles
 * against this one unchanged. The comments are ours.
 */
#ifndef _MRC_CTL_API_H_
#define _MRC_CTL_API_H_

#include <infiniband/verbs.h>
#include <mrc.h>
#include <mrc_ctl_api_ver.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MRC_CTL_MAX_VENDOR_CFG_SIZE 128

/* An EV entry with no value and no port (explicit EV arrays start out filled with it). */
#define MRC_CTL_EV_UNPOPULATED ((struct mrc_ctl_ev){.val = {0}, .port = 0})

/* Bytes of an EV value: 4 for STEV and UDP EVs, 16 + 16 for SRv6 (outer DA, SRH segment). */
#define MRC_CTL_EV_MAX_BYTES 32

enum mrc_ctl_protocol_version {
  MRC_CTL_PROTOCOL_VERSION_0 = 0,
  MRC_CTL_PROTOCOL_VERSION_1 = 1 << 0,
};

enum mrc_ctl_profile_state {
  MRC_CTL_PROFILE_INIT,    /* exists, not configured */
  MRC_CTL_PROFILE_OFFLINE, /* configured, not usable by QPs, modifiable */
  MRC_CTL_PROFILE_ONLINE,  /* usable by QPs */
};

/* ------------------------------------------------------------------------------------------
 * Device query
 * ------------------------------------------------------------------------------------------ */

/* Optional controller features (mrc_ctl_device_attr.opt_attr). */
enum mrc_ctl_attr_opt {
  MRC_CTL_OPT_CAP_EV_PROFILE_MODIFY_ONLINE = 1 << 0,
  MRC_CTL_OPT_CAP_CC_PROFILE_MODIFY_ONLINE = 1 << 1,
  MRC_CTL_OPT_CAP_EV_EVENT = 1 << 2,
  /* Explicit EV arrays must be one contiguous range starting at the first EV. */
  MRC_CTL_OPT_CAP_EV_EXPLICIT_RANGE = 1 << 3,
  MRC_CTL_OPT_CAP_EV_EVENT_PRECISE_DROP_CNT = 1 << 4,
  MRC_CTL_OPT_CAP_EP_OP_EV_PROBE = 1 << 5
};

struct mrc_ctl_device_attr {
  uint32_t mrc_ctl_protocol_version; /* mask of enum mrc_ctl_protocol_version */
  struct {
    uint32_t ev_max_fmt_profiles;  /* EV format profiles the device holds */
    uint32_t ev_max_profiles;      /* EV profiles the device holds */
    uint32_t ev_max_count;         /* EVs over all profiles */
    uint32_t ev_free_count;        /* of which not yet taken */
    uint32_t ev_max_count_profile; /* EVs in one profile (also explicit array length) */
    uint32_t ev_count_align;       /* explicit EV arrays are a multiple of this */
    uint32_t ev_max_width;         /* bits of an expanded EV */
    uint32_t ev_fmt_mode_mask;     /* enum mrc_ctl_ev_fmt_mode bits supported */
    uint32_t ev_mode_mask;         /* enum mrc_ctl_ev_mode bits supported */
    uint32_t ev_op_max_entries;    /* entries in one EV operation, 0 = no limit */
  } ev;
  struct {
    uint32_t cc_max_profiles;
    const char** algorithms; /* NULL-terminated, owned by the library */
  } cc;
  uint32_t phy_port_mask; /* bit N = port N (1-based) belongs to this device */
  uint32_t opt_attr;      /* mask of enum mrc_ctl_attr_opt */
};

#if MRC_CTL_API_VER_USED >= MRC_CTL_API_VER(1, 0, 1)
int mrc_ctl_query_device_ex(struct ibv_context* context, struct mrc_context* mcontext,
                            struct mrc_ctl_device_attr* ctl_attr, int* supported);
#endif
int mrc_ctl_query_device(struct ibv_context* context, struct mrc_ctl_device_attr* ctl_attr);

/* Controller API versions, independent of mrc_query_version(). Any pointer may be NULL. */
void mrc_ctl_query_version(uint32_t* current_version, uint32_t* last_supported_version,
                           uint32_t* vendor_version, uint32_t* last_supported_vendor_version);

/* ------------------------------------------------------------------------------------------
 * Port administration
 * ------------------------------------------------------------------------------------------ */

enum mrc_ctl_port_admin_state {
  MRC_CTL_PORT_ADMIN_DISABLED = 0,
  MRC_CTL_PORT_ADMIN_ENABLED = 1,
};

enum mrc_ctl_port_attr_mask {
  MRC_CTL_PORT_ADMIN_STATE = 1 << 0,
};

struct mrc_ctl_port_attr {
  /* A disabled port reads IBV_PORT_DOWN in ibv_query_port() and carries no traffic. */
  enum mrc_ctl_port_admin_state port_admin_state;
};

int mrc_ctl_query_port(struct mrc_context* context, uint8_t port_num,
                       struct mrc_ctl_port_attr* attr, int attr_mask);
int mrc_ctl_modify_port(struct mrc_context* context, uint8_t port_num,
                        struct mrc_ctl_port_attr* attr, int attr_mask);

/* ------------------------------------------------------------------------------------------
 * EV format profiles: how wide each field of an expanded EV is, and where it is carried
 * ------------------------------------------------------------------------------------------ */

enum mrc_ctl_ev_fmt_mode {
  MRC_CTL_EV_FMT_MODE_STEV = 1 << 0, /* IPv6 flow label + UDP source port */
  MRC_CTL_EV_FMT_MODE_SRV6 = 1 << 1, /* SRv6 uSID outer DA (+ one SRH segment) */
  MRC_CTL_EV_FMT_MODE_UDP = 1 << 2,  /* UDP source port only (IPv4 or IPv6) */
};

enum mrc_ctl_ev_fmt_op {
  MRC_CTL_EV_FMT_OP_MODIFY_FIELDS,
  MRC_CTL_EV_FMT_OP_QUERY_FIELDS,
};

enum mrc_ctl_ev_fmt_profile_attr_mask {
  MRC_CTL_EV_FMT_PROFILE_STATE = 1 << 0,
  MRC_CTL_EV_FMT_PROFILE_CUR_STATE = 1 << 1,
  MRC_CTL_EV_FMT_PROFILE_MODE = 1 << 2,
  MRC_CTL_EV_FMT_PROFILE_OP = 1 << 3,
  MRC_CTL_EV_FMT_VENDOR_CFG = 1 << 31,
};

struct mrc_ctl_ev_fmt_field {
  uint8_t width; /* bits */
};

struct mrc_ctl_ev_fmt_profile_attr {
  enum mrc_ctl_profile_state profile_state;     /* requested state */
  enum mrc_ctl_profile_state cur_profile_state; /* current state (query / assert) */
  enum mrc_ctl_ev_fmt_mode ev_fmt_mode;
  struct {
    enum mrc_ctl_ev_fmt_op op;
    struct mrc_ctl_ev_fmt_field* fmt_fields;
    int fmt_field_count; /* in: array length; out on E2BIG: length needed */
  } ev_fmt_op;
  uint8_t vendor_cfg[MRC_CTL_MAX_VENDOR_CFG_SIZE];
};

/* To OFFLINE needs MODE; to ONLINE needs fields (MODIFY_FIELDS). ONLINE allows only STATE
 * (back to OFFLINE) and QUERY_FIELDS. EBUSY while an ONLINE EV profile uses the format. */
int mrc_ctl_modify_ev_fmt_profile(struct mrc_context* mrc_ctx, uint64_t ev_fmt_profile_id,
                                  struct mrc_ctl_ev_fmt_profile_attr* attr, int attr_mask);
int mrc_ctl_query_ev_fmt_profile(struct mrc_context* mrc_ctx, uint64_t ev_fmt_profile_id,
                                 struct mrc_ctl_ev_fmt_profile_attr* attr, int attr_mask);

/* ------------------------------------------------------------------------------------------
 * EVs and EV profiles
 * ------------------------------------------------------------------------------------------ */

/* A compact EV: STEV/UDP in the first 4 bytes, SRv6 DA then SRH segment in 16 + 16. */
typedef uint8_t mrc_ctl_ev_t[MRC_CTL_EV_MAX_BYTES];

struct mrc_ctl_ev {
  mrc_ctl_ev_t val;
  uint8_t port; /* 1-based */
};

enum mrc_ctl_ev_state {
  MRC_CTL_EV_GOOD = 1 << 0,
  MRC_CTL_EV_ASSUMED_BAD = 1 << 1,
  MRC_CTL_EV_DENIED = 1 << 2, /* set by the controller only */
  MRC_CTL_EV_UNKNOWN = 1 << 31
};

enum mrc_ctl_ev_mode {
  MRC_CTL_EV_MODE_AUTO = 1 << 0, /* the device chooses EVs itself */
  MRC_CTL_EV_MODE_EXP = 1 << 1,  /* the controller lists every EV */
  MRC_CTL_EV_MODE_GEN = 1 << 2,  /* the device generates EVs within the fields' ranges */
};

enum mrc_ctl_ev_op {
  MRC_CTL_EV_OP_REPLACE_EV,
  MRC_CTL_EV_OP_MODIFY_EV_STATE,
  MRC_CTL_EV_OP_QUERY_EV_STATE,
  MRC_CTL_EV_OP_QUERY_EV_ARRAY,
};

enum mrc_ctl_ev_fields_op {
  MRC_CTL_EV_FIELDS_OP_MODIFY_FIELDS,
  MRC_CTL_EV_FIELDS_OP_QUERY_FIELDS,
};

enum mrc_ctl_ev_profile_attr_mask {
  MRC_CTL_EV_PROFILE_STATE = 1 << 0,
  MRC_CTL_EV_PROFILE_CUR_STATE = 1 << 1,
  MRC_CTL_EV_PROFILE_MODE = 1 << 2,
  MRC_CTL_EV_PROFILE_FMT_ID = 1 << 3,
  MRC_CTL_EV_PROFILE_COUNT = 1 << 4,
  MRC_CTL_EV_PROFILE_MIN_ACTIVE = 1 << 5,
  MRC_CTL_EV_PROFILE_EVENT_MASK = 1 << 6,
  MRC_CTL_EV_PROFILE_EV_OP = 1 << 7,
  MRC_CTL_EV_PROFILE_EV_FIELDS_OP = 1 << 8,
  MRC_CTL_EV_PROFILE_VENDOR_CFG = 1 << 31,
};

/* One field of an EV profile. Expansion of a field: start from init_val, then for every set
 * bit of mask, most significant first, put the next most significant bit of the EV there.
 * The expanded fields, concatenated, are the wire EV. A fixed field: width and init_val set,
 * min_val, max_val and mask zero. */
struct mrc_ctl_ev_field {
  uint32_t width;
  uint32_t init_val;
  uint32_t min_val; /* generated EVs: smallest value of the field's EV bits */
  uint32_t max_val; /* generated EVs: largest value (fits in popcount(mask) bits) */
  uint32_t mask;
};

enum mrc_ctl_ev_op_flags {
  MRC_CTL_EV_OP_F_ALL_COPIES = 1 << 0, /* REPLACE_EV: every occurrence, not one */
};

/* One entry of an EV operation. Which fields count:
 *   REPLACE_EV       ev, ev_new and state in; flags optional
 *   MODIFY_EV_STATE  ev and state in; flags optional
 *   QUERY_EV_STATE   ev in, state out
 *   QUERY_EV_ARRAY   ev and state out */
struct mrc_ctl_ev_op_entry {
  struct mrc_ctl_ev ev;
  struct mrc_ctl_ev ev_new;
  enum mrc_ctl_ev_state state;
  uint32_t flags;
};

struct mrc_ctl_ev_profile_attr {
  enum mrc_ctl_profile_state profile_state;
  enum mrc_ctl_profile_state cur_profile_state;
  enum mrc_ctl_ev_mode ev_mode;
  uint64_t ev_fmt_profile_id; /* the EV format profile (not for AUTO) */
  uint32_t ev_count;          /* EVs in the profile's array */
  uint32_t ev_min_active;     /* floor of usable EVs; <= ev_count */
  int ev_event_mask;          /* MRC_CTL_EV_ASSUMED_BAD | MRC_CTL_EV_GOOD: report those */
  struct {
    enum mrc_ctl_ev_op op;
    struct mrc_ctl_ev_op_entry* entries;
    int entry_count; /* in: array length; out on E2BIG: length needed */
  } ev_op;
  struct {
    enum mrc_ctl_ev_fields_op op;
    struct mrc_ctl_ev_field* fields;
    int field_count; /* in: array length; out on E2BIG: length needed */
  } ev_fields_op;
  uint8_t vendor_cfg[MRC_CTL_MAX_VENDOR_CFG_SIZE];
};

/* To OFFLINE needs MODE, FMT_ID, COUNT and fields (EV_FIELDS_OP MODIFY_FIELDS); to ONLINE needs
 * MIN_ACTIVE, EVENT_MASK and, for explicit profiles, every EV replaced (REPLACE_EV). EV_OP and
 * EV_FIELDS_OP in one call are EINVAL. EV operations stop at the first failing entry. */
int mrc_ctl_modify_ev_profile(struct mrc_context* mrc_ctx, uint64_t ev_profile_id,
                              struct mrc_ctl_ev_profile_attr* attr, int attr_mask);
int mrc_ctl_query_ev_profile(struct mrc_context* mrc_ctx, uint64_t ev_profile_id,
                             struct mrc_ctl_ev_profile_attr* attr, int attr_mask);

/* ------------------------------------------------------------------------------------------
 * CC profiles
 * ------------------------------------------------------------------------------------------ */

enum mrc_ctl_cc_profile_attr_mask {
  MRC_CTL_CC_PROFILE_STATE = 1 << 0,
  MRC_CTL_CC_PROFILE_CUR_STATE = 1 << 1,
  MRC_CTL_CC_PROFILE_ALGORITHM = 1 << 2,
  MRC_CTL_CC_PROFILE_CONFIG = 1 << 3,
  MRC_CTL_CC_PROFILE_VENDOR_CFG = 1 << 31,
};

struct mrc_ctl_cc_profile_attr {
  enum mrc_ctl_profile_state profile_state;
  enum mrc_ctl_profile_state cur_profile_state;
  const char* algorithm; /* one of mrc_ctl_device_attr.cc.algorithms; NULL = no CC */
  const void* cc_config; /* the algorithm's configuration (struct mrc_ctl_cc_nscc_cfg) */
  uint8_t vendor_cfg[MRC_CTL_MAX_VENDOR_CFG_SIZE];
};

/* Configuration of "uet-1.0-nscc" (UET NSCC). */
struct mrc_ctl_cc_nscc_cfg {
  uint8_t disable_qa;               /* non-zero: no quick adapt */
  uint32_t adjust_bytes_threshold;  /* bytes */
  uint32_t adjust_period_threshold; /* ns */
  uint32_t base_rtt;                /* ns */
  float eta;
  float fi;
  float fi_scale;
  float gamma;
  float max_md_jump;
  uint32_t max_cwnd; /* bytes */
  uint8_t qa_gate;
  uint32_t qa_threshold; /* ns */
  uint32_t target_delay; /* ns */
};

/* To OFFLINE needs ALGORITHM; to ONLINE needs CONFIG (NULL algorithm: none). */
int mrc_ctl_modify_cc_profile(struct mrc_context* mrc_ctx, uint64_t cc_profile_id,
                              struct mrc_ctl_cc_profile_attr* attr, int attr_mask);
/* A queried algorithm points to the library's own string; cc_config is not returned. */
int mrc_ctl_query_cc_profile(struct mrc_context* mrc_ctx, uint64_t cc_profile_id,
                             struct mrc_ctl_cc_profile_attr* attr, int attr_mask);

/* ------------------------------------------------------------------------------------------
 * EV events
 * ------------------------------------------------------------------------------------------ */

/* An EV of a profile changed to a state the profile's ev_event_mask watches. */
struct mrc_ctl_ev_event {
  uint64_t profile_id;
  struct mrc_ctl_ev ev;
  /* Events lost since the previous one delivered: a count with
   * MRC_CTL_OPT_CAP_EV_EVENT_PRECISE_DROP_CNT, else 1 if any. */
  uint32_t drop_count;
#if MRC_CTL_API_VER_USED >= MRC_CTL_API_VER(1, 0, 1)
  enum mrc_ctl_ev_state state; /* the new state (API 1.0.1 and later) */
#endif
};

/* A CQ of EV events. It never overruns: events that do not fit are counted as dropped. */
struct mrc_cq* mrc_ctl_create_ev_event_cq(struct mrc_context* mrc_ctx, int cqe, void* cq_context,
                                          struct mrc_comp_channel* channel, int comp_vector);
/* Returns the number of events written, or a negative errno value. */
int mrc_ctl_poll_ev_event(struct mrc_cq* ev_cq, int num_entries, struct mrc_ctl_ev_event* ev_event);

/* ------------------------------------------------------------------------------------------
 * Endpoint operations (connectionless requests to a peer node, BTH DestQP 2)
 * ------------------------------------------------------------------------------------------ */

enum mrc_ctl_ep_op_type { MRC_CTL_EP_OP_EV_PROBE, MRC_CTL_EP_OP_PORT_STATUS_UPDATE };

struct mrc_ctl_ep_req {
  uint16_t req_id;    /* unique among outstanding requests */
  union ibv_gid sgid; /* RoCEv2 GIDs only */
  union ibv_gid dgid;
  enum mrc_ctl_ev_fmt_mode ev_fmt_mode;
  struct mrc_ctl_ev req_ev; /* the EV (and port) the request travels on */
  union {
    struct {
      uint32_t port_status; /* bit N = port N usable */
    } port_status_update;
  } op;
};

struct mrc_ctl_ep_rsp {
  uint16_t req_id;
  uint8_t port;         /* where the response arrived (1-based) */
  unsigned int rtt;     /* ns */
  uint8_t adj_svc_time; /* non-zero: the responder's service time is taken out of rtt */
};

/* Sends num_req requests of one kind and waits up to rsp_timeout ns for their responses, which
 * are returned in arrival order (*num_rsp of them). Fails with ETIMEDOUT when some did not
 * come back (those that did are still in rsp). */
int mrc_ctl_ep_batch_send_wait(struct mrc_context* mrc_ctx, uint8_t req_tc,
                               enum mrc_ctl_ep_op_type op_type, struct mrc_ctl_ep_req* req,
                               int num_req, uint32_t rsp_timeout, struct mrc_ctl_ep_rsp* rsp,
                               int* num_rsp);

#ifdef __cplusplus
}
#endif

#endif /* _MRC_CTL_API_H_ */
