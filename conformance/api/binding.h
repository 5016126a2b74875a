// The library under test, bound with dlopen/dlsym: every mrc_* and ibv_* entry point the suite
// calls is looked up in the library's handle (dlsym searches the library, then its
// dependencies), so a lib_mrc.so that exports its own ibv_* functions (SoftMRC) gets them and one
// that leaves verbs to libibverbs gets those. Nothing is linked at build time.
#pragma once

#include <dlfcn.h>

#include <string>

#include "mrc.h"
#include "mrc_ctl.h"

namespace mrc::api {

// X(name): an mrc_* function with the header's own type. A library lacking a symbol leaves the
// pointer null; tests that need it report `fail` (mandatory) or `unsupported` (the _ex calls of
// API 1.0.1).
// clang-format off
#define MRC_API_FUNCTIONS(X) \
  X(mrc_query_version) \
  X(mrc_query_device) \
  X(mrc_query_device_ex) \
  X(mrc_create_context) \
  X(mrc_destroy_context) \
  X(mrc_create_comp_channel) \
  X(mrc_get_comp_channel_fd) \
  X(mrc_destroy_comp_channel) \
  X(mrc_create_cq) \
  X(mrc_poll_cq) \
  X(mrc_destroy_cq) \
  X(mrc_create_qp_hint) \
  X(mrc_destroy_qp_hint) \
  X(mrc_query_qp_hint) \
  X(mrc_modify_qp_hint) \
  X(mrc_create_qp) \
  X(mrc_destroy_qp) \
  X(mrc_query_qp) \
  X(mrc_modify_qp) \
  X(mrc_get_qpn) \
  X(mrc_post_recv) \
  X(mrc_post_send) \
  X(mrc_ctl_query_version) \
  X(mrc_ctl_query_device) \
  X(mrc_ctl_query_device_ex) \
  X(mrc_ctl_modify_ev_fmt_profile) \
  X(mrc_ctl_query_ev_fmt_profile) \
  X(mrc_ctl_modify_ev_profile) \
  X(mrc_ctl_query_ev_profile) \
  X(mrc_ctl_modify_cc_profile) \
  X(mrc_ctl_query_cc_profile) \
  X(mrc_ctl_create_ev_event_cq) \
  X(mrc_ctl_poll_ev_event) \
  X(mrc_ctl_ep_batch_send_wait) \
  X(mrc_get_async_event) \
  X(mrc_ack_async_event)
// clang-format on

struct Api {
  void* handle = nullptr;
#define MRC_API_MEMBER(name) decltype(&::name) name = nullptr;
  MRC_API_FUNCTIONS(MRC_API_MEMBER)
#undef MRC_API_MEMBER
  // Verbs: <infiniband/verbs.h> turns some of these names into macros over inline wrappers, so
  // the exported functions are spelled out here, as members named without the ibv_ prefix
  // (the symbol looked up is ibv_<member>).
  ibv_device** (*get_device_list)(int*) = nullptr;
  void (*free_device_list)(ibv_device**) = nullptr;
  const char* (*get_device_name)(ibv_device*) = nullptr;
  ibv_context* (*open_device)(ibv_device*) = nullptr;
  int (*close_device)(ibv_context*) = nullptr;
  int (*query_device)(ibv_context*, ibv_device_attr*) = nullptr;
  int (*query_gid)(ibv_context*, uint8_t, int, ibv_gid*) = nullptr;
  ibv_pd* (*alloc_pd)(ibv_context*) = nullptr;
  int (*dealloc_pd)(ibv_pd*) = nullptr;
  ibv_mr* (*reg_mr)(ibv_pd*, void*, size_t, int) = nullptr;
  int (*dereg_mr)(ibv_mr*) = nullptr;

  // dlopen + dlsym; returns an error text naming the library, empty on success.
  std::string bind(const std::string& path);
};

}  // namespace mrc::api
