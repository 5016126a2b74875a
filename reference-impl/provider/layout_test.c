/* The binary interface of our headers, pinned: every structure size and field offset the OCP
 * MRC headers give (measured from them on x86-64 Linux, once, by compiling the same list against
 * both and comparing; they matched), and the constants applications compile in. An edit to
 * include/ that changes what an application built for the OCP headers sees fails to compile.
 * Built as C, the language of the interface. */
#include <stddef.h>
#include <stdio.h>

#include "mrc.h"
#include "mrc_ctl.h"

#define SIZE(t, n) _Static_assert(sizeof(struct t) == (n), "sizeof(struct " #t ")")
#define AT(t, f, n) _Static_assert(offsetof(struct t, f) == (n), "offsetof(" #t ", " #f ")")
#define VALUE(c, n) _Static_assert((long long)(c) == (n##LL), #c)

SIZE(mrc_device_attr, 20);
AT(mrc_device_attr, wimm_attr.max_wimm_dest, 6);
AT(mrc_device_attr, mpr_attr.mpr_resolution, 9);
AT(mrc_device_attr, qp_attr, 12);
AT(mrc_device_attr, cap, 16);
SIZE(mrc_context_attr, 8);
SIZE(mrc_qp_hint_attr, 140);
AT(mrc_qp_hint_attr, vendor_cfg, 12);
SIZE(mrc_qp_hint_init_attr, 140);
SIZE(mrc_qp_init_attr, 72);
AT(mrc_qp_init_attr, cap, 24);
AT(mrc_qp_init_attr, pd, 48);
AT(mrc_qp_init_attr, send_ops_flags, 56);
AT(mrc_qp_init_attr, protocol_version, 64);
SIZE(mrc_qp_attr, 176);
AT(mrc_qp_attr, wimm, 2);
AT(mrc_qp_attr, timeout, 6);
AT(mrc_qp_attr, profile, 8);
AT(mrc_qp_attr, retry, 24);
AT(mrc_qp_attr, qp_hint, 32);
AT(mrc_qp_attr, cap, 40);
AT(mrc_qp_attr, vendor_cfg, 44);
SIZE(mrc_async_event, 16);
AT(mrc_async_event, event_type, 8);
SIZE(mrc_ctl_device_attr, 72);
AT(mrc_ctl_device_attr, ev.ev_op_max_entries, 40);
AT(mrc_ctl_device_attr, cc.algorithms, 56);
AT(mrc_ctl_device_attr, phy_port_mask, 64);
AT(mrc_ctl_device_attr, opt_attr, 68);
SIZE(mrc_ctl_port_attr, 4);
SIZE(mrc_ctl_ev_fmt_field, 1);
SIZE(mrc_ctl_ev_fmt_profile_attr, 168);
AT(mrc_ctl_ev_fmt_profile_attr, ev_fmt_op.fmt_fields, 24);
AT(mrc_ctl_ev_fmt_profile_attr, ev_fmt_op.fmt_field_count, 32);
AT(mrc_ctl_ev_fmt_profile_attr, vendor_cfg, 40);
SIZE(mrc_ctl_ev, 33);
AT(mrc_ctl_ev, port, 32);
SIZE(mrc_ctl_ev_field, 20);
SIZE(mrc_ctl_ev_op_entry, 76);
AT(mrc_ctl_ev_op_entry, state, 68);
AT(mrc_ctl_ev_op_entry, flags, 72);
SIZE(mrc_ctl_ev_profile_attr, 216);
AT(mrc_ctl_ev_profile_attr, ev_fmt_profile_id, 16);
AT(mrc_ctl_ev_profile_attr, ev_count, 24);
AT(mrc_ctl_ev_profile_attr, ev_min_active, 28);
AT(mrc_ctl_ev_profile_attr, ev_event_mask, 32);
AT(mrc_ctl_ev_profile_attr, ev_op.entries, 48);
AT(mrc_ctl_ev_profile_attr, ev_op.entry_count, 56);
AT(mrc_ctl_ev_profile_attr, ev_fields_op.fields, 72);
AT(mrc_ctl_ev_profile_attr, ev_fields_op.field_count, 80);
AT(mrc_ctl_ev_profile_attr, vendor_cfg, 88);
SIZE(mrc_ctl_cc_profile_attr, 152);
AT(mrc_ctl_cc_profile_attr, algorithm, 8);
AT(mrc_ctl_cc_profile_attr, cc_config, 16);
AT(mrc_ctl_cc_profile_attr, vendor_cfg, 24);
SIZE(mrc_ctl_cc_nscc_cfg, 52);
AT(mrc_ctl_cc_nscc_cfg, adjust_bytes_threshold, 4);
AT(mrc_ctl_cc_nscc_cfg, eta, 16);
AT(mrc_ctl_cc_nscc_cfg, max_cwnd, 36);
AT(mrc_ctl_cc_nscc_cfg, qa_gate, 40);
AT(mrc_ctl_cc_nscc_cfg, qa_threshold, 44);
AT(mrc_ctl_cc_nscc_cfg, target_delay, 48);
SIZE(mrc_ctl_ev_event, 56);
AT(mrc_ctl_ev_event, ev, 8);
AT(mrc_ctl_ev_event, drop_count, 44);
AT(mrc_ctl_ev_event, state, 48);
SIZE(mrc_ctl_ep_req, 88);
AT(mrc_ctl_ep_req, sgid, 8);
AT(mrc_ctl_ep_req, dgid, 24);
AT(mrc_ctl_ep_req, ev_fmt_mode, 40);
AT(mrc_ctl_ep_req, req_ev, 44);
AT(mrc_ctl_ep_req, op, 80);
SIZE(mrc_ctl_ep_rsp, 12);
AT(mrc_ctl_ep_rsp, port, 2);
AT(mrc_ctl_ep_rsp, rtt, 4);
AT(mrc_ctl_ep_rsp, adj_svc_time, 8);
VALUE(MRC_PROTOCOL_VERSION_1, 1);
VALUE(MRC_DEVICE_CAP_SVC_TIME, 4);
VALUE(MRC_QP_HINT_VENDOR_CFG, -2147483648);
VALUE(MRC_QP_VENDOR_CFG, -2147483648);
VALUE(MRC_QP_CAP, 512);
VALUE(MRC_QP_RETRY_CNT, 256);
VALUE(MRC_QP_CAP_SVC_TIME_DEST_UNSUPPORTED, 4);
VALUE(MRC_API_CURRENT_VERSION, 16777217);
VALUE(MRC_VENDOR_API_CURRENT_VERSION, 16777216);
VALUE(MRC_CTL_API_CURRENT_VERSION, 16777217);
VALUE(MRC_CTL_VENDOR_API_CURRENT_VERSION, 16777216);
VALUE((int)MRC_API_VER_LATEST, -1);
VALUE(MRC_CTL_PROFILE_ONLINE, 2);
VALUE(MRC_CTL_OPT_CAP_EP_OP_EV_PROBE, 32);
VALUE(MRC_CTL_PORT_ADMIN_ENABLED, 1);
VALUE(MRC_CTL_EV_FMT_MODE_UDP, 4);
VALUE(MRC_CTL_EV_FMT_OP_QUERY_FIELDS, 1);
VALUE(MRC_CTL_EV_FMT_VENDOR_CFG, -2147483648);
VALUE(MRC_CTL_EV_UNKNOWN, -2147483648);
VALUE(MRC_CTL_EV_MODE_GEN, 4);
VALUE(MRC_CTL_EV_OP_QUERY_EV_ARRAY, 3);
VALUE(MRC_CTL_EV_FIELDS_OP_QUERY_FIELDS, 1);
VALUE(MRC_CTL_EV_PROFILE_EV_FIELDS_OP, 256);
VALUE(MRC_CTL_EV_PROFILE_VENDOR_CFG, -2147483648);
VALUE(MRC_CTL_EV_OP_F_ALL_COPIES, 1);
VALUE(MRC_CTL_CC_PROFILE_CONFIG, 8);
VALUE(MRC_CTL_CC_PROFILE_VENDOR_CFG, -2147483648);
VALUE(MRC_CTL_EP_OP_PORT_STATUS_UPDATE, 1);
VALUE(MRC_CTL_MAX_VENDOR_CFG_SIZE, 128);
VALUE(MRC_CTL_EV_MAX_BYTES, 32);
VALUE(MRC_MAX_VENDOR_CFG_SIZE, 128);
VALUE(MRC_CTL_PROTOCOL_VERSION_1, 1);
VALUE(MRC_CTL_EV_DENIED, 4);

int main(void) {
  puts("mrc.h / mrc_ctl.h layout: 109 sizes, offsets and values as the OCP headers");
  return 0;
}
