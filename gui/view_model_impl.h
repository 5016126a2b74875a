// Internals shared by view_model.cc (the capture index) and view_logs.cc (event log, decision
// log, checker report, artifact detection). Not part of the public API.
#pragma once

#include <string>
#include <vector>

#include "gui/view_model.h"

namespace mrc::view {

// An engine retransmit event, kept to explain a retransmission in the packet pane.
struct RtxEvent {
  uint64_t ts_ns = 0;
  uint32_t psn = 0;
  uint32_t wev = 0;
  std::string cause;
  uint64_t attempt = 0;
};

struct ViewModel::Impl {
  LoadOptions opts;
  std::unique_ptr<wire::WireProfile> wire_profile;  // opts.wire_profile, or a copy of MRP0
  LoadStats stats;
  std::vector<std::string> warnings;
  std::vector<FrameInfo> frames;
  std::vector<Flow> flows;
  std::vector<Violation> violations;
  RunDir run;
  std::vector<PathEntry> paths;
  std::vector<std::vector<RtxEvent>> rtx_events;  // per flow
  std::vector<uint32_t> frame_orig_len;           // only when some frame was snapped
  // Log entries that explain a frame without a mark of their own (a trim the capture shows).
  std::vector<std::pair<uint32_t, std::string>> notes_on_frames;
  uint64_t first_ns = 0, last_ns = 0;
  bool pcapng = false;

  // The capture file, mapped (or read when it cannot be mapped).
  const std::byte* base = nullptr;
  size_t size = 0;
  void* mapping = nullptr;
  std::vector<std::byte> owned;

  ~Impl();
  bool map_file(const std::string& path, std::string& error);
  bool index_capture(std::string& error);

  // view_logs.cc
  void apply_event_log(const std::string& path);
  void apply_decision_log(const std::string& path);
  bool apply_report(const std::string& path, bool explicit_file, std::string& error);
  void apply_paths(const std::string& path);

  // Helpers for the logs.
  uint32_t lane_for(Flow& flow, uint32_t flow_index, uint32_t wev, bool create);
  int32_t rel_psn(const Flow& flow, uint32_t psn) const;
  void finish_ext(Flow& flow);
  void rebuild_states(Flow& flow);
  void warn(std::string w);
};

}  // namespace mrc::view
