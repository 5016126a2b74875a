// The field table: every name a script may use on a frame, how it reads from a decoded frame
// (expect) and how it is written into a frame to send. One table for both directions, so that a
// name means the same bytes whichever side of the connection uses it.
#include <algorithm>
#include <cstring>

#include "conformance/scripts/internal.h"
#include "reference-impl/engine/engine.h"

namespace mrc::scripts {

using wire::DecodedFrame;

namespace {

using Getter = std::optional<uint64_t> (*)(const DecodedFrame&, const FrameCtx&);
using Setter = void (*)(DecodedFrame&, uint64_t);

struct FieldDef {
  std::string_view name;
  Getter get;
  Setter set;  // nullptr: read-only (or handled by build_frame itself)
  bool psn = false;
};

std::optional<uint64_t> opt(bool present, uint64_t v) {
  return present ? std::optional<uint64_t>(v) : std::nullopt;
}

#define G(expr)                                                             \
  [](const DecodedFrame& f, const FrameCtx& c) -> std::optional<uint64_t> { \
    (void)c;                                                                \
    (void)f;                                                                \
    return expr;                                                            \
  }
#define S(stmt) [](DecodedFrame& f, uint64_t v) { stmt; }

const FieldDef kFields[] = {
    // IP / UDP carriage
    {"ev", G(opt(f.roce, wire::wev_of(f, c.format, wire::mrp0().ev_stripe()))), nullptr},
    {"plane", G(std::optional<uint64_t>(c.plane)), nullptr},
    {"dscp", G(opt(f.l3 != 0, f.dscp())), S(f.ip6.dscp = static_cast<uint8_t>(v & 63))},
    {"ecn", G(opt(f.l3 != 0, f.ecn())), S(f.ip6.ecn = static_cast<uint8_t>(v & 3))},
    {"sport", G(opt(f.has_udp, f.udp.sport)), nullptr},
    {"flow_label", G(opt(f.l3 == 6, f.ip6.flow_label)), nullptr},
    {"hop_limit", G(opt(f.l3 == 6, f.ip6.hop_limit)), S(f.ip6.hop_limit = static_cast<uint8_t>(v))},
    {"len", G(opt(f.roce, f.payload.size())), nullptr},
    {"icrc_ok", G(opt(f.roce, f.has_icrc&& wire::verify_icrc(f) ? 1 : 0)), nullptr},
    {"trimmed", G(opt(f.roce, f.trimmed ? 1 : 0)), nullptr},
    // BTH
    {"opcode", G(opt(f.roce, f.bth.opcode)), nullptr},
    {"psn", G(opt(f.roce, f.bth.psn)), S(f.bth.psn = static_cast<uint32_t>(v) & wire::kPsnMask),
     true},
    {"qpn", G(opt(f.roce, f.bth.dest_qp)), S(f.bth.dest_qp = static_cast<uint32_t>(v) & 0xFFFFFF)},
    {"ackreq", G(opt(f.roce, f.bth.ack_req)), S(f.bth.ack_req = v != 0)},
    {"rtx", G(opt(f.roce, f.bth.rtx)), S(f.bth.rtx = v != 0)},
    {"se", G(opt(f.roce, f.bth.se)), S(f.bth.se = v != 0)},
    {"ts", G(opt(f.roce, f.bth.ts)), S(f.bth.ts = v != 0)},
    {"tver", G(opt(f.roce, f.bth.tver)), S(f.bth.tver = static_cast<uint8_t>(v & 15))},
    {"pkey", G(opt(f.roce, f.bth.pkey)), S(f.bth.pkey = static_cast<uint16_t>(v))},
    {"pad", G(opt(f.roce, f.bth.pad_count)), S(f.bth.pad_count = static_cast<uint8_t>(v & 3))},
    // METH, TSETH
    {"msn", G(opt(f.has(wire::kHdrMeth), f.meth.msn)), S(f.meth.msn = static_cast<uint16_t>(v))},
    {"rqmsn", G(opt(f.has(wire::kHdrMeth), f.meth.rqmsn)),
     S(f.meth.rqmsn = static_cast<uint16_t>(v))},
    {"ts16",
     G(f.has(wire::kHdrTseth)  ? opt(true, f.tseth.ts16)
       : f.has(wire::kHdrPeth) ? opt(true, f.peth.ts16)
                               : opt(f.has(wire::kHdrErth), f.erth.ts16)),
     S(f.tseth.ts16 = f.peth.ts16 = f.erth.ts16 = static_cast<uint16_t>(v))},
    {"tsr",
     G(f.has(wire::kHdrTseth) ? opt(true, f.tseth.tsr) : opt(f.has(wire::kHdrPeth), f.peth.tsr)),
     S(f.tseth.tsr = f.peth.tsr = f.erth.tsr = v != 0)},
    // RETH, ImmDt, AETH
    {"va", G(opt(f.has(wire::kHdrReth), f.reth.va)), S(f.reth.va = v)},
    {"rkey", G(opt(f.has(wire::kHdrReth), f.reth.rkey)), S(f.reth.rkey = static_cast<uint32_t>(v))},
    {"dmalen", G(opt(f.has(wire::kHdrReth), f.reth.dma_len)),
     S(f.reth.dma_len = static_cast<uint32_t>(v))},
    {"imm", G(opt(f.has(wire::kHdrImm), f.immdt.imm)), S(f.immdt.imm = static_cast<uint32_t>(v))},
    {"syndrome", G(opt(f.has(wire::kHdrAeth), f.aeth.syndrome)),
     S(f.aeth.syndrome = static_cast<uint8_t>(v))},
    {"aeth_msn", G(opt(f.has(wire::kHdrAeth), f.aeth.msn)),
     S(f.aeth.msn = static_cast<uint32_t>(v) & 0xFFFFFF)},
    // SETH / NETH / PETH / ERTH / EETH (names shared where the headers share the meaning)
    {"m", G(f.has(wire::kHdrSeth) ? opt(true, f.seth.m) : opt(f.has(wire::kHdrNeth), f.neth.m)),
     S(f.seth.m = f.neth.m = static_cast<uint8_t>(v & 3))},
    {"pr", G(opt(f.has(wire::kHdrSeth), f.seth.pr)), S(f.seth.pr = v != 0)},
    {"offset", G(opt(f.has(wire::kHdrSeth), static_cast<uint16_t>(f.seth.ack_psn_offset))),
     S(f.seth.ack_psn_offset = static_cast<int16_t>(v))},
    {"probe_id",
     G(f.has(wire::kHdrPeth)
           ? opt(true, f.peth.probe_id)
           : opt(f.has(wire::kHdrSeth) && f.seth.pr, static_cast<uint16_t>(f.seth.ack_psn_offset))),
     S(f.peth.probe_id = static_cast<uint16_t>(v);
       f.seth.ack_psn_offset = static_cast<int16_t>(v))},
    {"entropy",
     G(f.has(wire::kHdrSeth)   ? opt(true, f.seth.entropy)
       : f.has(wire::kHdrNeth) ? opt(true, f.neth.entropy)
                               : opt(f.has(wire::kHdrEeth), f.eeth.entropy)),
     S(f.seth.entropy = f.neth.entropy = f.eeth.entropy = static_cast<uint32_t>(v))},
    {"spdcid",
     G(f.has(wire::kHdrSeth)   ? opt(true, f.seth.spdcid)
       : f.has(wire::kHdrNeth) ? opt(true, f.neth.spdcid)
                               : opt(f.has(wire::kHdrPeth), f.peth.spdcid)),
     S(f.seth.spdcid = f.neth.spdcid = f.peth.spdcid = static_cast<uint16_t>(v))},
    {"dpdcid",
     G(f.has(wire::kHdrSeth)   ? opt(true, f.seth.dpdcid)
       : f.has(wire::kHdrNeth) ? opt(true, f.neth.dpdcid)
                               : opt(f.has(wire::kHdrPeth), f.peth.dpdcid)),
     S(f.seth.dpdcid = f.neth.dpdcid = f.peth.dpdcid = static_cast<uint16_t>(v))},
    {"port_status", G(opt(f.has(wire::kHdrSeth), f.seth.port_status)),
     S(f.seth.port_status = static_cast<uint8_t>(v))},
    {"cack", G(opt(f.has(wire::kHdrSeth), f.seth.cack_psn)),
     S(f.seth.cack_psn = static_cast<uint32_t>(v) & wire::kPsnMask), true},
    {"psv",
     G(f.has(wire::kHdrSeth) ? opt(true, f.seth.psv) : opt(f.has(wire::kHdrNeth), f.neth.psv)),
     S(f.seth.psv = f.neth.psv = v != 0)},
    {"sva",
     G(f.has(wire::kHdrSeth)   ? opt(true, f.seth.sva)
       : f.has(wire::kHdrNeth) ? opt(true, f.neth.sva)
                               : opt(f.has(wire::kHdrEeth), f.eeth.sva)),
     S(f.seth.sva = f.neth.sva = f.eeth.sva = v != 0)},
    {"mpr", G(opt(f.has(wire::kHdrSeth), f.seth.mpr)), S(f.seth.mpr = static_cast<uint8_t>(v))},
    {"sack_offset", G(opt(f.has(wire::kHdrSeth), static_cast<uint16_t>(f.seth.sack_offset))),
     S(f.seth.sack_offset = static_cast<int16_t>(v))},
    {"bitmap", G(opt(f.has(wire::kHdrSeth), f.seth.sack_bitmap)), S(f.seth.sack_bitmap = v)},
    {"ts_echo",
     G(f.has(wire::kHdrCcState) ? opt(true, f.cc_state.ts_echo)
       : f.has(wire::kHdrNeth)  ? opt(true, f.neth.ts_echo)
                                : opt(f.has(wire::kHdrEeth), f.eeth.ts_echo)),
     S(f.cc_state.ts_echo = f.neth.ts_echo = f.eeth.ts_echo = static_cast<uint16_t>(v))},
    {"ooo", G(opt(f.has(wire::kHdrCcState), f.cc_state.ooo_count)),
     S(f.cc_state.ooo_count = static_cast<uint16_t>(v & 0x7FFF))},
    {"pen", G(opt(f.has(wire::kHdrCcState), f.cc_state.rcv_cwnd_pen)),
     S(f.cc_state.rcv_cwnd_pen = static_cast<uint8_t>(v & 127))},
    {"rc", G(opt(f.has(wire::kHdrCcState), f.cc_state.rc)), S(f.cc_state.rc = v != 0)},
    {"rcvd_bytes", G(opt(f.has(wire::kHdrCcState), f.cc_state.rcvd_bytes)),
     S(f.cc_state.rcvd_bytes = static_cast<uint32_t>(v) & 0xFFFFFF)},
    {"code", G(opt(f.has(wire::kHdrNeth), f.neth.nack_code)),
     S(f.neth.nack_code = static_cast<uint8_t>(v))},
    {"nack_psn", G(opt(f.has(wire::kHdrNeth), f.neth.nack_psn)),
     S(f.neth.nack_psn = static_cast<uint32_t>(v) & wire::kPsnMask), true},
    {"op", G(f.has(wire::kHdrErth) ? opt(true, f.erth.op) : opt(f.has(wire::kHdrEeth), f.eeth.op)),
     S(f.erth.op = f.eeth.op = static_cast<uint8_t>(v))},
    {"psm",
     G(f.has(wire::kHdrErth) ? opt(true, f.erth.port_status_mask)
                             : opt(f.has(wire::kHdrEeth), f.eeth.port_status_mask)),
     S(f.erth.port_status_mask = f.eeth.port_status_mask = static_cast<uint32_t>(v))},
    {"status", G(opt(f.has(wire::kHdrEeth), f.eeth.status)),
     S(f.eeth.status = static_cast<uint8_t>(v))},
    {"svc_time", G(opt(f.has(wire::kHdrEeth), f.eeth.svc_time)),
     S(f.eeth.svc_time = static_cast<uint16_t>(v))},
};

#undef G
#undef S

const FieldDef* find_def(std::string_view name) {
  for (const FieldDef& d : kFields)
    if (d.name == name) return &d;
  return nullptr;
}

// Fields build_frame handles itself (not plain header setters).
constexpr std::string_view kSendExtra[] = {"ev", "plane", "len", "cut"};
constexpr std::string_view kCompletionFields[] = {"wr_id", "status",   "opcode", "len",
                                                  "imm",   "with_imm", "qpn"};
constexpr std::string_view kMemoryFields[] = {"at", "len", "fill", "hex"};
constexpr std::string_view kPostFields[] = {"wr_id", "len", "imm", "va", "rkey", "fill"};

struct Constant {
  std::string_view name;
  uint64_t value;
};
constexpr Constant kConstants[] = {
    // NACK codes (MRP0)
    {"trimmed", 0x01},
    {"trimmed_lasthop", 0x02},
    {"no_bitmap", 0x06},
    {"no_pkt_buffer", 0x07},
    {"no_resource", 0x0A},
    {"psn_oor_window", 0x0B},
    {"unexp_event", 0x19},
    // SACK / NACK M
    {"skip_once", 1},
    {"always_skip", 2},
    // AETH syndromes
    {"ack", 0x1F},
    {"nak_invalid_request", 0x61},
    {"nak_remote_access", 0x62},
    {"nak_remote_op", 0x63},
    // endpoint operations
    {"port_status_update", 0},
    {"ev_probe", 1},
    // DSCP plan (MRP0)
    {"no_trim", 0},
    {"trimmable", 4},
    {"trimmable_retx", 8},
    {"dscp_trimmed", 12},
    {"dscp_trimmed_lasthop", 16},
    {"control", 46},
    {"ce", 3},
    // work completion statuses and opcodes (engine::WcStatus / WcOpcode)
    {"success", static_cast<uint64_t>(engine::WcStatus::kSuccess)},
    {"loc_len_err", static_cast<uint64_t>(engine::WcStatus::kLocLenErr)},
    {"rem_inv_req_err", static_cast<uint64_t>(engine::WcStatus::kRemInvReqErr)},
    {"rem_access_err", static_cast<uint64_t>(engine::WcStatus::kRemAccessErr)},
    {"rem_op_err", static_cast<uint64_t>(engine::WcStatus::kRemOpErr)},
    {"retry_exc_err", static_cast<uint64_t>(engine::WcStatus::kRetryExcErr)},
    {"wr_flush_err", static_cast<uint64_t>(engine::WcStatus::kWrFlushErr)},
    {"loc_qp_op_err", static_cast<uint64_t>(engine::WcStatus::kLocQpOpErr)},
    {"loc_prot_err", static_cast<uint64_t>(engine::WcStatus::kLocProtErr)},
    {"fatal_err", static_cast<uint64_t>(engine::WcStatus::kFatalErr)},
    {"general_err", static_cast<uint64_t>(engine::WcStatus::kGeneralErr)},
    {"rdma_write", static_cast<uint64_t>(engine::WcOpcode::kRdmaWrite)},
    {"recv_rdma_with_imm", static_cast<uint64_t>(engine::WcOpcode::kRecvRdmaWithImm)},
};

}  // namespace

std::optional<uint64_t> named_constant(std::string_view name) {
  for (const Constant& c : kConstants)
    if (c.name == name) return c.value;
  return std::nullopt;
}

std::string constant_names_hint() {
  return "e.g. trimmed, psn_oor_window, skip_once, ack, nak_remote_access, ev_probe, control, "
         "success";
}

std::optional<uint8_t> opcode_by_name(std::string_view name) {
  for (int op = 0; op < 256; ++op) {
    const wire::OpcodeInfo* i = wire::mrp0().opcode_info(static_cast<uint8_t>(op));
    if (i != nullptr && i->name == name) return static_cast<uint8_t>(op);
  }
  return std::nullopt;
}

std::string opcode_names_hint() {
  return "WRITE_ONLY, WRITE_FIRST, WRITE_MIDDLE, WRITE_LAST, WRITE_ONLY_IMM, WRITE_LAST_IMM, SACK, "
         "NACK, TRANSPORT_ACK, RELIABILITY_PROBE, ENDPOINT_REQUEST, ENDPOINT_RESPONSE, RC_...";
}

std::string header_keys_hint() {
  return "role, rules, tags, mutants, description, format, planes, mtu, mr_bytes, mr_fill, "
         "tester_qpn, "
         "tester_psn, dut_psn, tester_va, tester_rkey, mpr, dynamic_mpr, max_wimm, ack_trigger, "
         "ack_min_add, timeout, retry, recv_wqes, svc_time, trim_nack, reverse_probe, window, "
         "bound, tolerance, ignore";
}

std::string_view verb_name(Verb v) {
  switch (v) {
    case Verb::kSend:
      return "send";
    case Verb::kExpect:
      return "expect";
    case Verb::kExpectNothing:
      return "expect nothing";
    case Verb::kWait:
      return "wait";
    case Verb::kExpectCompletion:
      return "expect completion";
    case Verb::kExpectNoCompletion:
      return "expect no completion";
    case Verb::kExpectMemory:
      return "expect memory";
    case Verb::kPostWrite:
      return "post write";
  }
  return "?";
}

bool known_field(Verb v, std::string_view name) {
  auto in = [&](std::span<const std::string_view> list) {
    return std::find(list.begin(), list.end(), name) != list.end();
  };
  switch (v) {
    case Verb::kSend:
      return name == "fill" || name == "payload" || in(kSendExtra) ||
             (find_def(name) != nullptr && find_def(name)->set != nullptr);
    case Verb::kExpect:
      return find_def(name) != nullptr;
    case Verb::kExpectCompletion:
      return in(kCompletionFields);
    case Verb::kExpectMemory:
      return in(kMemoryFields);
    case Verb::kPostWrite:
      return in(kPostFields);
    default:
      return false;
  }
}

bool text_field(std::string_view name) {
  return name == "fill" || name == "payload" || name == "hex";
}

std::string fields_hint(Verb v) {
  std::string out;
  auto add = [&](std::string_view n) {
    if (!out.empty()) out += ", ";
    out += n;
  };
  switch (v) {
    case Verb::kSend:
      for (std::string_view n : kSendExtra) add(n);
      add("fill");
      add("payload");
      for (const FieldDef& d : kFields)
        if (d.set != nullptr) add(d.name);
      break;
    case Verb::kExpect:
      for (const FieldDef& d : kFields) add(d.name);
      break;
    case Verb::kExpectCompletion:
      for (std::string_view n : kCompletionFields) add(n);
      break;
    case Verb::kExpectMemory:
      for (std::string_view n : kMemoryFields) add(n);
      break;
    case Verb::kPostWrite:
      for (std::string_view n : kPostFields) add(n);
      break;
    default:
      break;
  }
  return out;
}

std::vector<std::string> field_names() {
  std::vector<std::string> out;
  for (const FieldDef& d : kFields) out.emplace_back(d.name);
  return out;
}

bool is_send_flag(std::string_view s) {
  return s == "bad_icrc" || s == "trim" || s == "trim_lasthop";
}

bool ts_field(std::string_view name) {
  return name == "ts16" || name == "ts_echo";
}

bool psn_field(std::string_view name) {
  const FieldDef* d = find_def(name);
  return d != nullptr && d->psn;
}

std::optional<uint64_t> get_field(std::string_view name, const DecodedFrame& f,
                                  const FrameCtx& ctx) {
  const FieldDef* d = find_def(name);
  if (d == nullptr) return std::nullopt;
  return d->get(f, ctx);
}

bool eval(const Expr& e, const std::map<std::string, uint64_t>& vars, bool psn, uint64_t& out,
          std::string& error) {
  uint64_t v = 0;
  for (const Expr::Term& t : e.terms) {
    uint64_t x = t.value;
    if (t.is_var) {
      auto it = vars.find(t.var);
      if (it == vars.end()) {
        error = "variable $" + t.var +
                " is not bound here (bind it by an earlier expectation "
                "or use a setup variable)";
        return false;
      }
      x = it->second;
    }
    v = t.negative ? v - x : v + x;
  }
  out = psn ? (v & wire::kPsnMask) : v;
  return true;
}

bool build_frame(const Statement& st, const SendValues& v, const Setup& setup, const Bindings& b,
                 std::vector<std::byte>& out, uint8_t& plane, std::string& error) {
  const wire::WireProfile& prof = wire::mrp0();
  if (st.opcode == "raw") {
    std::string why;
    if (!parse_hex(st.fields[0].text, out, why)) {
      error = why;
      return false;
    }
    plane = 1;
    return true;
  }
  const uint8_t opcode = *opcode_by_name(st.opcode);
  const wire::OpcodeInfo* info = prof.opcode_info(opcode);
  DecodedFrame s;
  s.has_eth = true;
  s.eth.src = b.tester_mac;
  s.eth.dst = b.dut_mac;
  s.eth.ethertype = wire::kEtherTypeIpv6;
  s.l3 = 6;
  s.ip6.src = b.tester_gid;
  s.ip6.dst = b.dut_gid;
  s.ip6.hop_limit = 64;
  s.has_udp = true;
  s.udp.dport = wire::kRoceV2Port;
  s.roce = true;
  s.bth.opcode = opcode;
  s.op = info;
  const bool data =
      info->kind == wire::PacketKind::kMrcData || info->kind == wire::PacketKind::kRcData;
  const bool last = info->position == wire::MessagePosition::kLast ||
                    info->position == wire::MessagePosition::kOnly;
  auto var = [&](const char* n) {
    auto it = b.vars.find(n);
    return it == b.vars.end() ? uint64_t{0} : it->second;
  };
  // Defaults: what a conforming peer would send on this connection.
  s.bth.dest_qp = static_cast<uint32_t>(var("dut_qpn"));
  s.ip6.dscp = data ? prof.dscp().trimmable : prof.dscp().control;
  if (info->kind == wire::PacketKind::kMrcEndpointRequest ||
      info->kind == wire::PacketKind::kMrcEndpointResponse)
    s.bth.dest_qp = wire::kEndpointOpQpn;
  if (info->kind == wire::PacketKind::kMrcData) {
    s.bth.ts = true;
    s.bth.ack_req = last;
    s.tseth.ftype = 1;
  }
  s.reth.va = var("va");
  s.reth.rkey = static_cast<uint32_t>(var("rkey"));
  s.seth.spdcid = s.neth.spdcid = s.peth.spdcid = static_cast<uint16_t>(setup.tester_qpn);
  s.seth.dpdcid = s.neth.dpdcid = s.peth.dpdcid = static_cast<uint16_t>(var("dut_qpn"));
  s.seth.psv = false;
  s.seth.sack_offset = 1;
  s.erth.op = static_cast<uint8_t>(wire::EndpointOp::kEvProbe);
  // A WEV that uses both halves in STEV (flow label and port), the port alone in UDP.
  uint32_t ev = setup.format == wire::EvFormat::kStev ? 0x1C001 : 0xC001;
  plane = 1;
  size_t len = 0;
  std::optional<size_t> cut;
  bool dmalen_set = false, psn_is_cack = true;
  for (const auto& [name, value] : v.fields) {
    if (name == "ev") {
      ev = static_cast<uint32_t>(value);
    } else if (name == "plane") {
      if (value < 1 || value > setup.planes) {
        error = "plane " + std::to_string(value) + " is not one of the script's " +
                std::to_string(setup.planes) + " planes";
        return false;
      }
      plane = static_cast<uint8_t>(value);
    } else if (name == "len") {
      if (value > 9000) {
        error = "len " + std::to_string(value) + " exceeds a jumbo frame";
        return false;
      }
      len = value;
    } else if (name == "cut") {
      cut = value;
    } else {
      const FieldDef* d = find_def(name);
      d->set(s, value);
      if (name == "dmalen") dmalen_set = true;
      if (name == "psn") psn_is_cack = false;
      if (name == "cack" && psn_is_cack) s.bth.psn = s.seth.cack_psn;
    }
  }
  std::vector<std::byte> payload;
  if (v.has_payload) {
    payload = v.payload;
  } else {
    payload.resize(len);
    const std::string fill = v.fill.empty() ? "inc:0" : v.fill;
    for (size_t k = 0; k < len; ++k) payload[k] = std::byte{fill_byte(fill, k)};
  }
  if (!dmalen_set) s.reth.dma_len = static_cast<uint32_t>(payload.size());
  s.payload = wire::as_bytes(payload);
  const wire::EvCarriage car = wire::carry_wev(setup.format, prof.ev_stripe(), ev);
  s.udp.sport = car.sport;
  s.ip6.flow_label = car.flow_label;
  s.headers = 0;  // the profile's stack for the opcode (+ TSETH when TS)
  wire::EncodeOptions eo;
  std::string why;
  out.resize(wire::encoded_size(s, eo, prof) + 64);
  const size_t n = wire::encode_frame(s, {out.data(), out.size()}, eo, prof, &why);
  if (n == 0) {
    error = "cannot encode the frame: " + why;
    return false;
  }
  out.resize(n);
  for (const std::string& flag : st.flags) {
    DecodedFrame d;
    wire::decode_frame(wire::as_bytes(out), d, {}, prof);
    if (flag == "bad_icrc") {
      if (!d.has_icrc) {
        error = "bad_icrc: the frame has no ICRC";
        return false;
      }
      const size_t at = out.size() - d.trailer.size() - wire::kIcrcBytes;
      for (size_t k = 0; k < wire::kIcrcBytes; ++k) out[at + k] ^= std::byte{0xFF};
    } else {
      const uint8_t dscp = flag == "trim" ? prof.dscp().trimmed : prof.dscp().trimmed_lasthop;
      const size_t m = wire::trim_frame({out.data(), out.size()}, d, dscp, prof, &why);
      if (m == 0) {
        error = flag + ": " + why;
        return false;
      }
      out.resize(m);
    }
  }
  if (cut) {
    if (*cut >= out.size()) {
      error = "cut=" + std::to_string(*cut) + " is not shorter than the frame (" +
              std::to_string(out.size()) + " bytes)";
      return false;
    }
    out.resize(*cut);
  }
  return true;
}

}  // namespace mrc::scripts
