// lib_mrc.so in device mode: the node's SoftMRC device lives in softmrcd and every call on its
// objects is a request on the device socket (devproto.h), except mrc_poll_cq on an application
// CQ, which reads the CQ's completion ring (cq_ring.h). Private header of lib_mrc.so.
//
// Selected by MRC_SOFT_DEVICE=<socket path>; without it the library runs the device in the
// process as before (README.md, "One device per node").
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "mrc.h"
#include "mrc_ctl.h"
#include "reference-impl/provider/devproto.h"

namespace softmrc::client {

// Pages of the process's memory shared with the device process (a sealed memfd mapped at the
// same addresses on both sides), counted by the MRs that use them.
struct Run {
  uint64_t len = 0;
  int refs = 0;
};

// The process's one connection to the device process.
struct Conn {
  int sock = -1;
  int stop_fd = -1;  // eventfd: ends the monitor thread
  std::mutex mu;     // one request at a time on the socket
  std::atomic<bool> dead{false};
  std::thread monitor;               // notices the device process's death even while nobody calls
  int refs = 0;                      // open verbs contexts
  std::mutex objs_mu;                // the tables below
  std::map<uint64_t, void*> by_rid;  // device handle -> our object (mrc objects)
  std::set<mrc_context*> ctxs;
  std::set<mrc_cq*> cqs;
  std::set<mrc_comp_channel*> chans;
  std::set<mrc_qp_hint*> hints;
  std::set<mrc_qp*> qps;
  std::set<mrc_context*> fatal_delivered;
  std::map<uint64_t, Run> runs;  // by start address
};

struct Reply {
  int32_t rc = -1;
  int32_t err = EIO;
  std::vector<uint8_t> buf;
  std::vector<int> fds;
  size_t off = 0;  // where the op's results start in buf
  devproto::Reader reader() const { return {buf.data() + off, buf.size() - off}; }
};

// The socket path of device mode, or nullptr for the in-process device.
const char* device_socket();
// The process's connection (opened on first use). nullptr with errno set.
Conn* open_conn();
void close_conn(Conn* c);
// One request, its reply. false (and rep.err) when the device process is gone: every call
// after that fails with EIO.
bool rpc(Conn* c, devproto::Writer& req, Reply& rep, const std::vector<int>& fds = {});

// The device handle of one of our verbs objects on a device-mode context (0: not one).
uint64_t vctx_rid(ibv_context* ctx, Conn** conn);
uint64_t pd_rid(ibv_pd* pd);

// Our objects of device mode: true when the pointer is one (the API call goes to the device).
bool is_remote(const mrc_context* p);
bool is_remote(const mrc_cq* p);
bool is_remote(const mrc_comp_channel* p);
bool is_remote(const mrc_qp_hint* p);
bool is_remote(const mrc_qp* p);

// Memory registration in device mode (verbs.cc calls these).
int share_range(Conn* c, uint64_t addr, uint64_t len, std::vector<uint64_t>& new_starts,
                std::vector<uint64_t>& new_lens, std::vector<int>& fds,
                std::vector<uint64_t>& ref_starts);
void commit_range(Conn* c, const std::vector<uint64_t>& new_starts,
                  const std::vector<uint64_t>& new_lens, const std::vector<int>& fds,
                  const std::vector<uint64_t>& ref_starts, bool registered);
void release_range(Conn* c, const std::vector<uint64_t>& starts);

}  // namespace softmrc::client

// The API on device-mode objects, one function per API call (client.cc).
namespace softmrc::remote {
mrc_context* create_context(ibv_context* vctx, mrc_context_attr* attr);
int destroy_context(mrc_context* ctx);
int query_device_ex(ibv_context* vctx, mrc_context* ctx, mrc_device_attr* attr, int* supported);
int create_comp_channel(mrc_context* ctx, mrc_comp_channel** ch);
int destroy_comp_channel(mrc_comp_channel* ch);
mrc_cq* create_cq(mrc_context* ctx, int cqe, void* cq_context, mrc_comp_channel* ch, int vector,
                  bool ev_cq);
int poll_cq(mrc_cq* cq, int n, ibv_wc* wc);
int destroy_cq(mrc_cq* cq);
int req_notify_cq(mrc_cq* cq, int solicited_only);
int get_cq_event(mrc_comp_channel* ch, mrc_cq** cq, void** cq_context);
void ack_cq_events(mrc_cq* cq, unsigned n);
mrc_qp_hint* create_qp_hint(mrc_context* ctx, mrc_qp_hint_init_attr* a);
int destroy_qp_hint(mrc_qp_hint* h);
int query_qp_hint(mrc_qp_hint* h, mrc_qp_hint_attr* a, int mask, bool modify);
mrc_qp* create_qp(mrc_context* ctx, mrc_qp_init_attr* a);
int destroy_qp(mrc_qp* qp);
int modify_qp(mrc_qp* qp, ibv_qp_attr* v, int vmask, mrc_qp_attr* m, int mmask);
int query_qp(mrc_qp* qp, ibv_qp_attr* v, int vmask, mrc_qp_attr* m, int mmask,
             mrc_qp_init_attr* init);
int post_send(mrc_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr);
int post_recv(mrc_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr);
int get_async_event(mrc_context* ctx, mrc_async_event* ev);
int ctl_query_device_ex(ibv_context* vctx, mrc_context* ctx, mrc_ctl_device_attr* a, int* supported,
                        const char** algorithms);
int ctl_port(mrc_context* ctx, uint8_t port, mrc_ctl_port_attr* a, int mask, bool modify);
int ctl_ev_fmt_profile(mrc_context* ctx, uint64_t id, mrc_ctl_ev_fmt_profile_attr* a, int mask,
                       bool modify);
int ctl_ev_profile(mrc_context* ctx, uint64_t id, mrc_ctl_ev_profile_attr* a, int mask,
                   bool modify);
int ctl_cc_profile(mrc_context* ctx, uint64_t id, mrc_ctl_cc_profile_attr* a, int mask, bool modify,
                   const char* const* algorithms);
int ctl_poll_ev_event(mrc_cq* cq, int n, mrc_ctl_ev_event* out);
int ctl_ep_batch_send_wait(mrc_context* ctx, uint8_t tc, mrc_ctl_ep_op_type op, mrc_ctl_ep_req* req,
                           int num_req, uint32_t timeout, mrc_ctl_ep_rsp* rsp, int* num_rsp);
}  // namespace softmrc::remote
