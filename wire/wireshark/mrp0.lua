-- Wireshark dissector for MRC wire profile MRP0 (docs/wire-format.md).
--
-- MRC is RoCEv2 with extra opcodes in the IBTA manufacturer-specific range, so it shares UDP
-- port 4791 with plain RoCEv2. This script takes over the port but first hands every packet to
-- the dissector that owned it before (Wireshark's InfiniBand/RRoCE dissector): standard opcodes
-- keep their infiniband.* fields, MRC packets keep the built-in BTH fields, and for MRC opcodes
-- an "MRC (MRP0)" tree with mrc.* fields is added after them.
--
-- Load with `tshark -X lua_script:mrp0.lua`, or copy to ~/.local/lib/wireshark/plugins/.
-- Field names are the JSON keys of `mrct decode --json` prefixed with "mrc." (NETH's code is
-- mrc.nack_code), so that crosscheck.py can compare the two decoders field by field.
--
-- Network-facing: every read is bounds-checked against the bytes present, malformed input
-- gets an expert info, and no Lua error escapes to Wireshark.

local mrc = Proto("mrc", "MRC (MRP0)")

local band, bor, bxor, bnot = bit32.band, bit32.bor, bit32.bxor, bit32.bnot
local lshift, rshift = bit32.lshift, bit32.rshift

----------------------------------------------------------------------------------------------
-- The profile
----------------------------------------------------------------------------------------------

local OPCODE_NAMES = {
  [0xC6] = "WRITE_FIRST",
  [0xC7] = "WRITE_MIDDLE",
  [0xC8] = "WRITE_LAST",
  [0xC9] = "WRITE_LAST_IMM",
  [0xCA] = "WRITE_ONLY",
  [0xCB] = "WRITE_ONLY_IMM",
  [0xD1] = "TRANSPORT_ACK",
  [0xD8] = "ENDPOINT_REQUEST",
  [0xD9] = "ENDPOINT_RESPONSE",
  [0xDC] = "SACK",
  [0xDD] = "NACK",
  [0xDE] = "RELIABILITY_PROBE",
}
local IMM_OPCODES = { [0xC9] = true, [0xCB] = true }
-- Opcodes whose packets may carry a pad: LAST, ONLY and their IMM forms.
local PAD_OPCODES = { [0xC8] = true, [0xC9] = true, [0xCA] = true, [0xCB] = true }
local function is_data(op) return op >= 0xC6 and op <= 0xCB end

-- Header stacks after the BTH. Data packets: METH, TSETH if BTH.TS, RETH, ImmDt on *_IMM.
local CONTROL_STACKS = {
  [0xD1] = { "aeth" },
  [0xD8] = { "erth" },
  [0xD9] = { "eeth" },
  [0xDC] = { "seth", "cc" },
  [0xDD] = { "neth" },
  [0xDE] = { "peth" },
}
local HEADER_SIZE = {
  meth = 4, tseth = 4, reth = 16, imm = 4, aeth = 4, seth = 28, cc = 8, neth = 20, peth = 16,
  erth = 16, eeth = 36,
}
-- The codec's layer names (wire/codec.cc), so that error texts line up with mrct's.
local HEADER_LABEL = {
  meth = "METH", tseth = "TSETH", reth = "RETH", imm = "ImmDt", aeth = "AETH", seth = "SETH",
  cc = "CC_STATE", neth = "NETH", peth = "PETH", erth = "ERTH", eeth = "EETH",
}
local BTH_BYTES = 12
local ICRC_BYTES = 4
local ROCE_PORT = 4791

-- Open choices of the wire profile (docs/wire-format.md section 19), from a profile file: the
-- "Wire profile file" preference, or MRC_WIRE_PROFILE in the environment (tshark runs). Only
-- the keys this dissector uses are read; the C++ tools validate the rest.
local wire = { ports = { ROCE_PORT }, stripe_high = nil, eeth_op_shift = 4, eeth_sva_bit = 3,
               dscp_trimmed = nil, dscp_trimmed_lasthop = nil, ecmp_flow_label_ev = false,
               srv6_wev_none = false }

-- A reader for the flat TOML the profile files use: [table] headers, key = value with
-- integers, booleans, "strings" and [integer, ...] arrays, # comments. Returns nil, why.
local function read_profile(path)
  local fh, err = io.open(path, "r")
  if not fh then return nil, "cannot open " .. path .. ": " .. tostring(err) end
  local out, section, n = {}, "", 0
  for line in fh:lines() do
    n = n + 1
    -- Cut a comment: the first # outside a "string".
    local quoted, cut = false, nil
    for i = 1, #line do
      local c = line:sub(i, i)
      if c == '"' then
        quoted = not quoted
      elseif c == "#" and not quoted then
        cut = i
        break
      end
    end
    if cut then line = line:sub(1, cut - 1) end
    line = line:gsub("^%s+", ""):gsub("%s+$", "")
    if line ~= "" then
      local t = line:match("^%[([%w_]+)%]$")
      if t then
        section = t .. "."
      else
        local k, v = line:match("^([%w_]+)%s*=%s*(.-)$")
        if not k then fh:close(); return nil, path .. ":" .. n .. ": not key = value" end
        local val
        if v:match('^".*"$') then
          val = v:sub(2, -2)
        elseif v == "true" or v == "false" then
          val = v == "true"
        elseif v:match("^%[.*%]$") then
          val = {}
          for x in v:gmatch("%d+") do val[#val + 1] = tonumber(x) end
        elseif tonumber(v) then
          val = tonumber(v)
        else
          fh:close()
          return nil, path .. ":" .. n .. ": " .. section .. k .. ": unreadable value " .. v
        end
        out[section .. k] = val
      end
    end
  end
  fh:close()
  return out
end

local function apply_profile(path)
  wire = { ports = { ROCE_PORT }, stripe_high = nil, eeth_op_shift = 4, eeth_sva_bit = 3,
           dscp_trimmed = nil, dscp_trimmed_lasthop = nil, ecmp_flow_label_ev = false,
           srv6_wev_none = false }
  if path == nil or path == "" then return end
  local p, why = read_profile(path)
  if not p then
    report_failure("MRC wire profile: " .. why)
    return
  end
  if type(p["udp.ports"]) == "table" and #p["udp.ports"] > 0 then wire.ports = p["udp.ports"] end
  if p["ev.stripe"] ~= nil then wire.stripe_high = p["ev.stripe"] == "high_in_sport" end
  wire.ecmp_flow_label_ev = p["ev.ecmp_flow_label"] == "ev"
  if p["headers.eeth_op_bits"] == "3..2" then wire.eeth_op_shift = 2 end
  if p["headers.eeth_sva_bit"] then wire.eeth_sva_bit = p["headers.eeth_sva_bit"] end
  wire.dscp_trimmed = p["dscp.trimmed"]
  wire.dscp_trimmed_lasthop = p["dscp.trimmed_lasthop"]
  wire.srv6_wev_none = p["srv6.wev_carriage"] == "none"
end

local NACK_CODES = {
  [0x01] = "TRIMMED",
  [0x02] = "TRIMMED_LASTHOP",
  [0x06] = "NO_BITMAP",
  [0x07] = "NO_PKT_BUFFER",
  [0x0A] = "NO_RESOURCE",
  [0x0B] = "PSN_OOR_WINDOW",
  [0x19] = "UNEXP_EVENT",
}
local M_CODES = { [0] = "NONE", [1] = "SKIP_ONCE", [2] = "ALWAYS_SKIP", [3] = "invalid" }
local ENDPOINT_OPS = {
  [0] = "PORT_STATUS_UPDATE", [1] = "EV_PROBE", [2] = "invalid", [3] = "invalid",
}
local AETH_SYNDROMES = {
  [0x1F] = "ACK (no credit count)",
  [0x61] = "NAK invalid request",
  [0x62] = "NAK remote access error",
  [0x63] = "NAK remote operational error",
}
local CC_TYPES = { [0] = "NSCC" }
local EETH_STATUS = { [0] = "OK" }

----------------------------------------------------------------------------------------------
-- Fields
----------------------------------------------------------------------------------------------

local f = {}
local field_list = {}  -- registration order = the order `tshark -G fields` lists them

-- add(key, constructor, abbreviation, label, ...): the rest as ProtoField.<constructor> takes it.
local function add(key, ctor, abbr, label, ...)
  local pf = ProtoField[ctor](abbr, label, ...)
  f[key] = pf
  field_list[#field_list + 1] = pf
end
local DEC, HEX = base.DEC, base.HEX

-- BTH: the bytes the built-in dissector shows as infiniband.bth.*, in MRC's words.
add("opcode", "uint8", "mrc.opcode", "Opcode", HEX, OPCODE_NAMES)
add("se", "bool", "mrc.se", "Solicited event", 8, nil, 0x80)
add("mig_req", "bool", "mrc.mig_req", "MigReq", 8, nil, 0x40)
add("pad", "uint8", "mrc.pad", "Pad count", DEC, nil, 0x30)
add("tver", "uint8", "mrc.tver", "Transport header version", DEC, nil, 0x0F)
add("pkey", "uint16", "mrc.pkey", "P_Key", HEX)
add("variant", "uint8", "mrc.variant", "Variant byte (reserved)", HEX)
add("dest_qp", "uint24", "mrc.dest_qp", "Destination QP", HEX)
add("ack_req", "bool", "mrc.ack_req", "AckReq (A)", 8, nil, 0x80)
add("bth_rsvd6", "uint8", "mrc.bth.rsvd6", "Reserved (byte 8 bit 6)", DEC, nil, 0x40)
add("rtx", "bool", "mrc.rtx", "Retransmission (RTX)", 8, nil, 0x20)
add("ts", "bool", "mrc.ts", "TSETH present (TS)", 8, nil, 0x10)
add("bth_rsvd_lo", "uint8", "mrc.bth.rsvd_lo", "Reserved (byte 8 bits 3..0)", HEX, nil, 0x0F)
add("psn", "uint24", "mrc.psn", "PSN", DEC)
-- Entropy value as the outer layers carry it (docs/wire-format.md section 10).
add("ev_format", "string", "mrc.ev_format", "EV format")
add("wev", "uint32", "mrc.wev", "Wire EV (WEV)", HEX)
-- METH
add("meth_rqmsn", "uint16", "mrc.meth.rqmsn", "RQMSN", DEC)
add("meth_msn", "uint16", "mrc.meth.msn", "MSN", DEC)
-- TSETH
add("tseth_ts16", "uint16", "mrc.tseth.ts16", "ts16 (128 ns ticks)", DEC)
add("tseth_tsr", "uint16", "mrc.tseth.tsr", "TSR", DEC, nil, 0x8000)
add("tseth_reserved", "uint16", "mrc.tseth.reserved", "Reserved", HEX, nil, 0x7FF0)
add("tseth_ftype", "uint16", "mrc.tseth.ftype", "FTYPE", DEC, nil, 0x000F)
-- RETH
add("reth_va", "uint64", "mrc.reth.va", "Virtual address", HEX)
add("reth_rkey", "uint32", "mrc.reth.rkey", "R_Key", HEX)
add("reth_len", "uint32", "mrc.reth.len", "DMA length (message bytes)", DEC)
-- ImmDt
add("imm", "uint32", "mrc.imm", "Immediate data", HEX)
-- AETH
add("aeth_syndrome", "uint8", "mrc.aeth.syndrome", "Syndrome", HEX, AETH_SYNDROMES)
add("aeth_msn", "uint24", "mrc.aeth.msn", "MSN", DEC)
-- SETH
add("seth_reserved0", "uint8", "mrc.seth.reserved0", "Reserved (byte 0)", HEX)
add("seth_m", "uint8", "mrc.seth.m", "M (ECN / EV echo)", DEC, M_CODES, 0x60)
add("seth_pr", "bool", "mrc.seth.pr", "PR (probe response)", 8, nil, 0x02)
add("seth_rsvd_b1", "uint8", "mrc.seth.rsvd_b1", "Reserved (byte 1)", HEX, nil, 0x9D)
add("seth_ack_psn_offset", "int16", "mrc.seth.ack_psn_offset", "ack_psn_offset", DEC)
add("seth_entropy", "uint32", "mrc.seth.entropy", "Entropy (echoed WEV)", HEX)
add("seth_spdcid", "uint16", "mrc.seth.spdcid", "spdcid", DEC)
add("seth_dpdcid", "uint16", "mrc.seth.dpdcid", "dpdcid", DEC)
add("seth_port_status", "uint8", "mrc.seth.port_status", "Port status", HEX)
add("seth_cack_psn", "uint24", "mrc.seth.cack_psn", "Cumulative ACK PSN", DEC)
add("seth_cc_type", "uint8", "mrc.seth.cc_type", "CC type", DEC, CC_TYPES, 0xF0)
add("seth_cc_flags_rsvd", "uint8", "mrc.seth.cc_flags_rsvd", "CC flags (reserved)", DEC, nil,
    0x0C)
add("seth_psv", "bool", "mrc.seth.psv", "PSV (port status valid)", 8, nil, 0x02)
add("seth_sva", "bool", "mrc.seth.sva", "SVA (service time added)", 8, nil, 0x01)
add("seth_mpr", "uint8", "mrc.seth.mpr", "MPR (128-PSN units)", DEC)
add("seth_sack_offset", "int16", "mrc.seth.sack_offset", "SACK offset", DEC)
add("seth_sack_bitmap", "uint64", "mrc.seth.sack_bitmap", "SACK bitmap", HEX)
add("seth_sack_base", "uint24", "mrc.seth.sack_base", "SACK bitmap base PSN", DEC)
-- CC_STATE
add("cc_ts_echo", "uint16", "mrc.cc.ts_echo", "ts_echo", DEC)
add("cc_rsvd", "uint16", "mrc.cc.rsvd", "Reserved", DEC, nil, 0x8000)
add("cc_ooo_count", "uint16", "mrc.cc.ooo_count", "Out-of-order count", DEC, nil, 0x7FFF)
add("cc_rc", "bool", "mrc.cc.rc", "RC (restore cwnd)", 8, nil, 0x80)
add("cc_rcv_cwnd_pen", "uint8", "mrc.cc.rcv_cwnd_pen", "Receiver cwnd penalty", DEC, nil, 0x7F)
add("cc_rcvd_bytes", "uint24", "mrc.cc.rcvd_bytes", "Received bytes (256 B units)", DEC)
-- NETH
add("neth_reserved0", "uint16", "mrc.neth.reserved0", "Reserved (bytes 0-1)", HEX)
add("nack_code", "uint8", "mrc.nack_code", "NACK code", HEX, NACK_CODES)
add("neth_vendor_code", "uint8", "mrc.neth.vendor_code", "Vendor code", HEX)
add("neth_entropy", "uint32", "mrc.neth.entropy", "Entropy (echoed WEV)", HEX)
add("neth_spdcid", "uint16", "mrc.neth.spdcid", "spdcid", DEC)
add("neth_dpdcid", "uint16", "mrc.neth.dpdcid", "dpdcid", DEC)
add("neth_reserved12", "uint8", "mrc.neth.reserved12", "Reserved (byte 12)", HEX)
add("neth_nack_psn", "uint24", "mrc.neth.nack_psn", "NACK PSN", DEC)
add("neth_cc_type", "uint8", "mrc.neth.cc_type", "CC type", DEC, CC_TYPES, 0xF0)
add("neth_cc_flags_rsvd", "uint8", "mrc.neth.cc_flags_rsvd", "CC flags (reserved)", DEC, nil,
    0x0C)
add("neth_psv", "bool", "mrc.neth.psv", "PSV", 8, nil, 0x02)
add("neth_sva", "bool", "mrc.neth.sva", "SVA (service time added)", 8, nil, 0x01)
add("neth_m", "uint8", "mrc.neth.m", "M (ECN / EV echo)", DEC, M_CODES, 0xC0)
add("neth_reserved17", "uint8", "mrc.neth.reserved17", "Reserved (byte 17)", HEX, nil, 0x3F)
add("neth_ts_echo", "uint16", "mrc.neth.ts_echo", "ts_echo", DEC)
-- PETH
add("peth_reserved0", "uint24", "mrc.peth.reserved0", "Reserved (bytes 0-2)", HEX)
add("peth_vendor", "uint8", "mrc.peth.vendor", "Vendor", HEX)
add("peth_probe_id", "uint16", "mrc.peth.probe_id", "Probe ID", DEC)
add("peth_reserved6", "uint16", "mrc.peth.reserved6", "Reserved (bytes 6-7)", HEX)
add("peth_spdcid", "uint16", "mrc.peth.spdcid", "spdcid", DEC)
add("peth_dpdcid", "uint16", "mrc.peth.dpdcid", "dpdcid", DEC)
add("peth_ts16", "uint16", "mrc.peth.ts16", "ts16 (128 ns ticks)", DEC)
add("peth_tsr", "uint16", "mrc.peth.tsr", "TSR", DEC, nil, 0x8000)
add("peth_reserved_tsr", "uint16", "mrc.peth.reserved_tsr", "Reserved", HEX, nil, 0x7FF0)
add("peth_ftype", "uint16", "mrc.peth.ftype", "FTYPE", DEC, nil, 0x000F)
-- ERTH
add("erth_reserved0", "uint8", "mrc.erth.reserved0", "Reserved (byte 0)", HEX)
add("erth_rsvd_b1", "uint8", "mrc.erth.rsvd_b1", "Reserved (byte 1)", HEX, nil, 0xFC)
add("erth_op", "uint8", "mrc.erth.op", "Operation", DEC, ENDPOINT_OPS, 0x03)
add("erth_reserved2", "uint8", "mrc.erth.reserved2", "Reserved (byte 2)", HEX)
add("erth_vendor", "uint8", "mrc.erth.vendor", "Vendor", HEX)
add("erth_port_status_mask", "uint32", "mrc.erth.port_status_mask",
    "Port status mask (bit N = port N)", HEX)
add("erth_reserved8", "uint32", "mrc.erth.reserved8", "Reserved (bytes 8-11)", HEX)
add("erth_ts16", "uint16", "mrc.erth.ts16", "ts16 (128 ns ticks)", DEC)
add("erth_tsr", "uint16", "mrc.erth.tsr", "TSR", DEC, nil, 0x8000)
add("erth_reserved_tsr", "uint16", "mrc.erth.reserved_tsr", "Reserved", HEX, nil, 0x7FF0)
add("erth_ftype", "uint16", "mrc.erth.ftype", "FTYPE", DEC, nil, 0x000F)
-- EETH
add("eeth_reserved0", "uint8", "mrc.eeth.reserved0", "Reserved (byte 0)", HEX)
-- Byte 1's layout is a profile choice (op at bits 5..4 or 3..2, the SVA bit): values are
-- computed and added explicitly rather than through fixed masks.
add("eeth_rsvd_b1", "uint8", "mrc.eeth.rsvd_b1", "Reserved (byte 1)", HEX)
add("eeth_op", "uint8", "mrc.eeth.op", "Operation", DEC, ENDPOINT_OPS)
add("eeth_sva", "bool", "mrc.eeth.sva", "SVA (service time added)")
add("eeth_status", "uint8", "mrc.eeth.status", "Status", DEC, EETH_STATUS)
add("eeth_vendor", "uint8", "mrc.eeth.vendor", "Vendor", HEX)
add("eeth_entropy", "uint32", "mrc.eeth.entropy", "Entropy (request WEV)", HEX)
add("eeth_port_status_mask", "uint32", "mrc.eeth.port_status_mask",
    "Port status mask (bit N = port N)", HEX)
add("eeth_reserved12", "bytes", "mrc.eeth.reserved12", "Reserved (bytes 12-27)")
add("eeth_ts_echo", "uint16", "mrc.eeth.ts_echo", "ts_echo", DEC)
add("eeth_svc_time", "uint16", "mrc.eeth.svc_time", "Service time (128 ns ticks)", DEC)
add("eeth_reserved32", "uint32", "mrc.eeth.reserved32", "Reserved (bytes 32-35)", HEX)
-- Payload, pad, ICRC, trim
add("payload", "bytes", "mrc.payload", "Payload")
add("payload_len", "uint32", "mrc.payload_len", "Payload length", DEC)
add("pad_bytes", "bytes", "mrc.pad_bytes", "Pad")
add("icrc", "uint32", "mrc.icrc", "ICRC", HEX)
add("icrc_ok", "bool", "mrc.icrc_ok", "ICRC correct")
add("icrc_computed", "uint32", "mrc.icrc_computed", "ICRC computed", HEX)
add("trimmed", "bool", "mrc.trimmed", "Trimmed")
mrc.fields = field_list

local E, S = expert.group, expert.severity
local ef = {
  truncated = ProtoExpert.new("mrc.expert.truncated", "MRC packet truncated", E.MALFORMED,
                              S.ERROR),
  bad_pad = ProtoExpert.new("mrc.expert.bad_pad", "Pad count exceeds the payload", E.MALFORMED,
                            S.ERROR),
  reserved = ProtoExpert.new("mrc.expert.reserved", "Reserved field is not zero", E.PROTOCOL,
                             S.WARN),
  invalid = ProtoExpert.new("mrc.expert.invalid", "Invalid field value", E.PROTOCOL, S.WARN),
  trimmed = ProtoExpert.new("mrc.expert.trimmed", "Trimmed data packet (no ICRC)", E.SEQUENCE,
                            S.NOTE),
  rtx = ProtoExpert.new("mrc.expert.rtx", "Retransmission", E.SEQUENCE, S.NOTE),
  nak = ProtoExpert.new("mrc.expert.nak", "Negative acknowledgement", E.SEQUENCE, S.WARN),
  icrc_bad = ProtoExpert.new("mrc.expert.icrc_bad", "ICRC mismatch", E.CHECKSUM, S.ERROR),
  icrc_unverified = ProtoExpert.new("mrc.expert.icrc_unverified", "ICRC not verified",
                                    E.CHECKSUM, S.CHAT),
  capture_limited = ProtoExpert.new("mrc.expert.capture_limited",
                                    "Packet size limited during capture", E.UNDECODED, S.NOTE),
  builtin = ProtoExpert.new("mrc.expert.builtin", "Built-in InfiniBand dissector stopped",
                            E.MALFORMED, S.WARN),
  internal = ProtoExpert.new("mrc.expert.internal", "MRC dissector error", E.UNDECODED,
                             S.ERROR),
}
mrc.experts = {
  ef.truncated, ef.bad_pad, ef.reserved, ef.invalid, ef.trimmed, ef.rtx, ef.nak, ef.icrc_bad,
  ef.icrc_unverified, ef.capture_limited, ef.builtin, ef.internal,
}

-- Deployment constants (docs/wire-format.md, decisions 1 and 7).
local STRIPE_HIGH_IN_SPORT = 2
mrc.prefs.stripe = Pref.enum("EV stripe", 1,
                             "Which half of the 32-bit WEV the UDP source port carries",
                             { { 1, "LOW_IN_SPORT", 1 },
                               { 2, "HIGH_IN_SPORT", STRIPE_HIGH_IN_SPORT } }, false)
mrc.prefs.dscp_trimmed = Pref.uint("DSCP TRIMMED", 12,
                                   "DSCP a switch writes on a packet it trimmed")
mrc.prefs.dscp_trimmed_lasthop = Pref.uint("DSCP TRIMMED_LASTHOP", 16,
                                           "DSCP the last-hop switch writes on a packet it trimmed")
mrc.prefs.verify_icrc = Pref.bool("Verify ICRC", true, "Recompute the ICRC of every MRC packet")
mrc.prefs.profile = Pref.string("Wire profile file", os.getenv("MRC_WIRE_PROFILE") or "",
                                "Profile file (TOML, docs/wire-format.md section 19): UDP ports, "
                                .. "EV stripe, EETH bits, DSCP plan; overrides the settings above")
local function stripe_high()
  if wire.stripe_high ~= nil then return wire.stripe_high end
  return mrc.prefs.stripe == STRIPE_HIGH_IN_SPORT
end
local function dscp_trimmed() return wire.dscp_trimmed or mrc.prefs.dscp_trimmed end
local function dscp_trimmed_lasthop()
  return wire.dscp_trimmed_lasthop or mrc.prefs.dscp_trimmed_lasthop
end

----------------------------------------------------------------------------------------------
-- Outer layers, read through field extractors: the dissector itself sees only the UDP payload
----------------------------------------------------------------------------------------------

local fx_ip_version = Field.new("ip.version")  -- present in IPv4 and IPv6 headers alike
local fx_udp_srcport = Field.new("udp.srcport")

-- The IP headers and the UDP header in front of `tvb`, or nil when they cannot be located.
-- outer: the first IP header (switches rewrite its DSCP and trim on it); carrier: the one that
-- carries UDP (SRv6's inner header; the ICRC covers it).
local function outer_layers(tvb)
  local udp_fi
  for _, fi in ipairs({ fx_udp_srcport() }) do
    if fi.offset + 8 == tvb:offset() then udp_fi = fi end
  end
  if not udp_fi then return nil end
  local src = udp_fi.source
  local src_name = tostring(src)
  local ips = {}
  for _, fi in ipairs({ fx_ip_version() }) do
    -- Only headers in the same buffer, before this UDP header, belong to this packet.
    if fi.offset < udp_fi.offset and tostring(fi.source) == src_name then
      ips[#ips + 1] = { offset = fi.offset, version = fi.value }
    end
  end
  if #ips == 0 then return nil end
  local v6_count = 0
  for _, ip in ipairs(ips) do
    if ip.version == 4 and src:len() >= ip.offset + 20 then
      ip.hdr_len = band(src:range(ip.offset, 1):uint(), 0x0F) * 4
      ip.dscp = rshift(src:range(ip.offset + 1, 1):uint(), 2)
      ip.flow_label = 0
    elseif ip.version == 6 and src:len() >= ip.offset + 40 then
      local w = src:range(ip.offset, 4):uint()
      ip.hdr_len = 40
      ip.dscp = band(rshift(w, 22), 0x3F)
      ip.flow_label = band(w, 0xFFFFF)
      v6_count = v6_count + 1
    else
      return nil
    end
  end
  return {
    outer = ips[1],
    carrier = ips[#ips],
    inner_ip6 = v6_count >= 2 and ips[1].version == 6 and ips[#ips].version == 6,
    sport = udp_fi.value,
    udp_offset = udp_fi.offset,
    source = src,
  }
end

-- CRC-32 (IEEE 802.3, reflected), the ICRC's polynomial.
local CRC_TABLE = {}
for i = 0, 255 do
  local c = i
  for _ = 1, 8 do
    if band(c, 1) == 1 then c = bxor(rshift(c, 1), 0xEDB88320) else c = rshift(c, 1) end
  end
  CRC_TABLE[i] = c
end
local function crc_update(c, s)
  for i = 1, #s do c = bxor(rshift(c, 8), CRC_TABLE[band(bxor(c, s:byte(i)), 0xFF)]) end
  return c
end
local function set_byte(s, i, v) return s:sub(1, i - 1) .. string.char(v) .. s:sub(i + 1) end

-- The ICRC over 8 bytes of ones (the LRH), the carrier IP header and UDP header with their
-- variant fields set to ones, the BTH with byte 4 set to ones, and the rest of the packet up to
-- the ICRC. nil when some of those bytes are not in the capture.
local function compute_icrc(tvb, layers, icrc_off)
  local ip, src = layers.carrier, layers.source
  if layers.udp_offset + 8 > src:len() or ip.offset + ip.hdr_len > layers.udp_offset then
    return nil
  end
  if icrc_off > tvb:len() or icrc_off < BTH_BYTES then return nil end
  local iph = src:raw(ip.offset, ip.hdr_len)
  if ip.version == 4 then
    iph = set_byte(iph, 2, 0xFF)                          -- TOS
    iph = set_byte(iph, 9, 0xFF)                          -- TTL
    iph = set_byte(set_byte(iph, 11, 0xFF), 12, 0xFF)     -- header checksum
  else
    iph = set_byte(iph, 1, bor(iph:byte(1), 0x0F))        -- traffic class, high nibble
    iph = iph:sub(1, 1) .. "\255\255\255" .. iph:sub(5)   -- traffic class rest, flow label
    iph = set_byte(iph, 8, 0xFF)                          -- hop limit
  end
  local udph = src:raw(layers.udp_offset, 6) .. "\255\255"  -- checksum
  local bth = set_byte(tvb:raw(0, BTH_BYTES), 5, 0xFF)      -- variant byte
  local c = crc_update(0xFFFFFFFF, string.rep("\255", 8))
  c = crc_update(crc_update(crc_update(c, iph), udph), bth)
  if icrc_off > BTH_BYTES then c = crc_update(c, tvb:raw(BTH_BYTES, icrc_off - BTH_BYTES)) end
  return bnot(c)
end

----------------------------------------------------------------------------------------------
-- Extension headers. Each function gets its header's own bytes, already bounds-checked.
----------------------------------------------------------------------------------------------

local function check_reserved(item, range, name)
  for i = 0, range:len() - 1 do
    if range:range(i, 1):uint() ~= 0 then
      item:add_proto_expert_info(ef.reserved, name .. " is not zero")
      return
    end
  end
end
local function check_reserved_bits(item, value, mask, name)
  if band(value, mask) ~= 0 then item:add_proto_expert_info(ef.reserved, name .. " is not zero") end
end
local function check_op(item, op)
  if op > 1 then item:add_proto_expert_info(ef.invalid, "endpoint op " .. op .. " is invalid") end
end
-- TSR(1) | reserved(11) | FTYPE(4), shared by TSETH, PETH and ERTH.
local function add_tsr_word(t, r, tsr, reserved, ftype)
  t:add(tsr, r)
  check_reserved_bits(t:add(reserved, r), r:uint(), 0x7FF0, "TSR word reserved bits")
  t:add(ftype, r)
end

local info = {}  -- pieces of the Info column, reset per packet

local dissect_header = {}

function dissect_header.meth(t, r)
  t:add(f.meth_rqmsn, r(0, 2))
  t:add(f.meth_msn, r(2, 2))
  info[#info + 1] = "MSN=" .. r(2, 2):uint()
end

function dissect_header.tseth(t, r)
  t:add(f.tseth_ts16, r(0, 2))
  add_tsr_word(t, r(2, 2), f.tseth_tsr, f.tseth_reserved, f.tseth_ftype)
end

function dissect_header.reth(t, r)
  t:add(f.reth_va, r(0, 8))
  t:add(f.reth_rkey, r(8, 4))
  t:add(f.reth_len, r(12, 4))
end

function dissect_header.imm(t, r)
  t:add(f.imm, r(0, 4))
end

function dissect_header.aeth(t, r)
  local syndrome = r(0, 1):uint()
  local it = t:add(f.aeth_syndrome, r(0, 1))
  t:add(f.aeth_msn, r(1, 3))
  if band(syndrome, 0x60) == 0x60 then
    it:add_proto_expert_info(ef.nak, "NAK: " .. (AETH_SYNDROMES[syndrome] or
                                                 string.format("syndrome 0x%02x", syndrome)))
  end
  info[#info + 1] = string.format("syndrome=0x%02x MSN=%d", syndrome, r(1, 3):uint())
end

function dissect_header.seth(t, r)
  check_reserved(t:add(f.seth_reserved0, r(0, 1)), r(0, 1), "SETH byte 0")
  local b1 = r(1, 1):uint()
  local it_m = t:add(f.seth_m, r(1, 1))
  if band(b1, 0x60) == 0x60 then it_m:add_proto_expert_info(ef.invalid, "M = 3 is invalid") end
  t:add(f.seth_pr, r(1, 1))
  check_reserved_bits(t:add(f.seth_rsvd_b1, r(1, 1)), b1, 0x9D, "SETH byte 1 reserved bits")
  t:add(f.seth_ack_psn_offset, r(2, 2))
  t:add(f.seth_entropy, r(4, 4))
  t:add(f.seth_spdcid, r(8, 2))
  t:add(f.seth_dpdcid, r(10, 2))
  t:add(f.seth_port_status, r(12, 1))
  t:add(f.seth_cack_psn, r(13, 3))
  t:add(f.seth_cc_type, r(16, 1))
  check_reserved_bits(t:add(f.seth_cc_flags_rsvd, r(16, 1)), r(16, 1):uint(), 0x0C,
                      "SETH cc_flags")
  t:add(f.seth_psv, r(16, 1))
  t:add(f.seth_sva, r(16, 1))
  t:add(f.seth_mpr, r(17, 1))
  t:add(f.seth_sack_offset, r(18, 2))
  t:add(f.seth_sack_bitmap, r(20, 8))
  local cack = r(13, 3):uint()
  local base_psn = (cack + r(18, 2):int()) % 0x1000000
  t:add(f.seth_sack_base, base_psn):set_generated()
  info[#info + 1] = string.format("cack=%d sack_base=%d bitmap=0x%s", cack, base_psn,
                                  r(20, 8):bytes():tohex())
  if band(b1, 0x02) ~= 0 then info[#info + 1] = "PR" end
end

function dissect_header.cc(t, r)
  t:add(f.cc_ts_echo, r(0, 2))
  check_reserved_bits(t:add(f.cc_rsvd, r(2, 2)), r(2, 2):uint(), 0x8000, "CC_STATE reserved bit")
  t:add(f.cc_ooo_count, r(2, 2))
  t:add(f.cc_rc, r(4, 1))
  t:add(f.cc_rcv_cwnd_pen, r(4, 1))
  t:add(f.cc_rcvd_bytes, r(5, 3))
end

function dissect_header.neth(t, r)
  check_reserved(t:add(f.neth_reserved0, r(0, 2)), r(0, 2), "NETH bytes 0-1")
  local code = r(2, 1):uint()
  local it = t:add(f.nack_code, r(2, 1))
  if not NACK_CODES[code] then
    it:add_proto_expert_info(ef.invalid, string.format("NACK code 0x%02x is not in MRP0", code))
  end
  t:add(f.neth_vendor_code, r(3, 1))
  t:add(f.neth_entropy, r(4, 4))
  t:add(f.neth_spdcid, r(8, 2))
  t:add(f.neth_dpdcid, r(10, 2))
  check_reserved(t:add(f.neth_reserved12, r(12, 1)), r(12, 1), "NETH byte 12")
  t:add(f.neth_nack_psn, r(13, 3))
  t:add(f.neth_cc_type, r(16, 1))
  check_reserved_bits(t:add(f.neth_cc_flags_rsvd, r(16, 1)), r(16, 1):uint(), 0x0C,
                      "NETH cc_flags")
  t:add(f.neth_psv, r(16, 1))
  t:add(f.neth_sva, r(16, 1))
  t:add(f.neth_m, r(17, 1))
  check_reserved_bits(t:add(f.neth_reserved17, r(17, 1)), r(17, 1):uint(), 0x3F,
                      "NETH byte 17 reserved bits")
  t:add(f.neth_ts_echo, r(18, 2))
  info[#info + 1] = string.format("%s nack_psn=%d",
                                  NACK_CODES[code] or string.format("code=0x%02x", code),
                                  r(13, 3):uint())
end

function dissect_header.peth(t, r)
  check_reserved(t:add(f.peth_reserved0, r(0, 3)), r(0, 3), "PETH bytes 0-2")
  t:add(f.peth_vendor, r(3, 1))
  t:add(f.peth_probe_id, r(4, 2))
  check_reserved(t:add(f.peth_reserved6, r(6, 2)), r(6, 2), "PETH bytes 6-7")
  t:add(f.peth_spdcid, r(8, 2))
  t:add(f.peth_dpdcid, r(10, 2))
  t:add(f.peth_ts16, r(12, 2))
  add_tsr_word(t, r(14, 2), f.peth_tsr, f.peth_reserved_tsr, f.peth_ftype)
  info[#info + 1] = "probe_id=" .. r(4, 2):uint()
end

function dissect_header.erth(t, r)
  check_reserved(t:add(f.erth_reserved0, r(0, 1)), r(0, 1), "ERTH byte 0")
  local b1 = r(1, 1):uint()
  check_reserved_bits(t:add(f.erth_rsvd_b1, r(1, 1)), b1, 0xFC, "ERTH byte 1 reserved bits")
  local op = band(b1, 0x03)
  check_op(t:add(f.erth_op, r(1, 1)), op)
  check_reserved(t:add(f.erth_reserved2, r(2, 1)), r(2, 1), "ERTH byte 2")
  t:add(f.erth_vendor, r(3, 1))
  t:add(f.erth_port_status_mask, r(4, 4))
  check_reserved(t:add(f.erth_reserved8, r(8, 4)), r(8, 4), "ERTH bytes 8-11")
  t:add(f.erth_ts16, r(12, 2))
  add_tsr_word(t, r(14, 2), f.erth_tsr, f.erth_reserved_tsr, f.erth_ftype)
  info[#info + 1] = ENDPOINT_OPS[op]
end

function dissect_header.eeth(t, r)
  check_reserved(t:add(f.eeth_reserved0, r(0, 1)), r(0, 1), "EETH byte 0")
  local b1 = r(1, 1):uint()
  local sva_mask = lshift(1, wire.eeth_sva_bit)
  local rsvd_mask = band(bnot(bor(lshift(3, wire.eeth_op_shift), sva_mask)), 0xFF)
  check_reserved_bits(t:add(f.eeth_rsvd_b1, r(1, 1), band(b1, rsvd_mask)), b1, rsvd_mask,
                      "EETH byte 1 reserved bits")
  local op = band(rshift(b1, wire.eeth_op_shift), 0x03)
  check_op(t:add(f.eeth_op, r(1, 1), op), op)
  t:add(f.eeth_sva, r(1, 1), band(b1, sva_mask) ~= 0)
  t:add(f.eeth_status, r(2, 1))
  t:add(f.eeth_vendor, r(3, 1))
  t:add(f.eeth_entropy, r(4, 4))
  t:add(f.eeth_port_status_mask, r(8, 4))
  check_reserved(t:add(f.eeth_reserved12, r(12, 16)), r(12, 16), "EETH bytes 12-27")
  t:add(f.eeth_ts_echo, r(28, 2))
  t:add(f.eeth_svc_time, r(30, 2))
  check_reserved(t:add(f.eeth_reserved32, r(32, 4)), r(32, 4), "EETH bytes 32-35")
  info[#info + 1] = ENDPOINT_OPS[op]
end

----------------------------------------------------------------------------------------------
-- The packet
----------------------------------------------------------------------------------------------

-- `off` is relative to the UDP payload; messages give the offset in the frame, as mrct does.
local function truncated(item, tvb, what, off, need, have)
  item:add_proto_expert_info(ef.truncated,
                             string.format("%s truncated at offset %d: need %d bytes, have %d",
                                           what, tvb:offset() + off, need, have))
end
-- The packet is complete on the wire, but the capture kept fewer bytes (snap length).
local function capture_limited(item, tvb, what, off, need, have)
  item:add_proto_expert_info(ef.capture_limited,
                             string.format("%s at offset %d not captured: need %d bytes, have %d",
                                           what, tvb:offset() + off, need, have))
end

-- EV format and WEV as the codec derives them (wire.h: DecodedFrame::ev_format,
-- wev_from_carriage).
local function entropy(layers)
  local fmt = "udp"
  if layers.inner_ip6 then
    fmt = "srv6"
  elseif layers.outer.version == 6 and layers.outer.flow_label ~= 0 and
         not (wire.ecmp_flow_label_ev and layers.outer.flow_label == layers.sport) then
    fmt = "stev"
  end
  if fmt == "udp" then return fmt, layers.sport end
  if fmt == "srv6" and wire.srv6_wev_none then return fmt, 0 end
  local fl16 = band(layers.carrier.flow_label, 0xFFFF)
  if stripe_high() then
    return fmt, bor(lshift(layers.sport, 16), fl16)
  end
  return fmt, bor(lshift(fl16, 16), layers.sport)
end

local function dissect_bth(root, tvb, opcode)
  local b8 = tvb(8, 1):uint()
  local bth = root:add(tvb(0, BTH_BYTES), "BTH")
  bth:add(f.opcode, tvb(0, 1))
  bth:add(f.se, tvb(1, 1))
  bth:add(f.mig_req, tvb(1, 1))
  local pad_item = bth:add(f.pad, tvb(1, 1))
  bth:add(f.tver, tvb(1, 1))
  bth:add(f.pkey, tvb(2, 2))
  bth:add(f.variant, tvb(4, 1))
  bth:add(f.dest_qp, tvb(5, 3))
  bth:add(f.ack_req, tvb(8, 1))
  check_reserved_bits(bth:add(f.bth_rsvd6, tvb(8, 1)), b8, 0x40, "BTH byte 8 bit 6")
  local rtx_item = bth:add(f.rtx, tvb(8, 1))
  bth:add(f.ts, tvb(8, 1))
  check_reserved_bits(bth:add(f.bth_rsvd_lo, tvb(8, 1)), b8, 0x0F, "BTH byte 8 bits 3..0")
  bth:add(f.psn, tvb(9, 3))
  if band(b8, 0x20) ~= 0 then rtx_item:add_proto_expert_info(ef.rtx) end
  if band(tvb(1, 1):uint(), 0x30) ~= 0 and not PAD_OPCODES[opcode] then
    pad_item:add_proto_expert_info(ef.invalid, "pad count on an opcode that carries no pad")
  end
  return pad_item
end

local function dissect_mrc(tvb, pinfo, tree)
  info = {}
  local opcode = tvb(0, 1):uint()
  local name = OPCODE_NAMES[opcode]
  local rlen = tvb:reported_len()  -- the UDP payload as sent (UDP length - 8)
  local clen = tvb:len()           -- the part of it in the capture
  local root = tree:add(mrc, tvb(), "MRC (MRP0), " .. name)
  pinfo.cols.protocol:set("MRC")

  if rlen < BTH_BYTES or clen < BTH_BYTES then
    root:add(f.opcode, tvb(0, 1))
    if rlen < BTH_BYTES then
      truncated(root, tvb, "BTH", 0, BTH_BYTES, rlen)
    else
      capture_limited(root, tvb, "BTH", 0, BTH_BYTES, clen)
    end
    pinfo.cols.info:set("MRC " .. name .. " [truncated]")
    return
  end
  local pad_item = dissect_bth(root, tvb, opcode)
  local pad = rshift(band(tvb(1, 1):uint(), 0x30), 4)
  local b8 = tvb(8, 1):uint()

  -- EV carriage and trim state come from the IP and UDP headers in front of this payload.
  local layers = outer_layers(tvb)
  local trimmed = false
  if layers then
    local fmt, wev = entropy(layers)
    root:add(f.ev_format, fmt):set_generated()
    root:add(f.wev, wev):set_generated()
    local dscp = layers.outer.dscp
    trimmed = is_data(opcode) and
              (dscp == dscp_trimmed() or dscp == dscp_trimmed_lasthop())
  end
  local trim_item = root:add(f.trimmed, trimmed)
  trim_item:set_generated()
  if trimmed then trim_item:add_proto_expert_info(ef.trimmed) end

  local summary = string.format("MRC %s QP=0x%06x PSN=%d", name, tvb(5, 3):uint(),
                                tvb(9, 3):uint())
  if band(b8, 0x80) ~= 0 then summary = summary .. " A" end
  if band(b8, 0x20) ~= 0 then summary = summary .. " RTX" end

  -- Extension headers, walked as the codec walks them: a trimmed packet has no ICRC and may
  -- end anywhere after the BTH; any other packet must hold its whole stack plus the ICRC.
  local off = BTH_BYTES
  local body_end = rlen
  if not trimmed then
    if rlen - off < ICRC_BYTES then
      truncated(root, tvb, "ICRC", off, ICRC_BYTES, rlen - off)
      pinfo.cols.info:set(summary .. " [truncated]")
      return
    end
    body_end = rlen - ICRC_BYTES
  end
  local stack = CONTROL_STACKS[opcode]
  if is_data(opcode) then
    stack = { "meth" }
    if band(b8, 0x10) ~= 0 then stack[#stack + 1] = "tseth" end
    stack[#stack + 1] = "reth"
    if IMM_OPCODES[opcode] then stack[#stack + 1] = "imm" end
  end
  for _, h in ipairs(stack) do
    local size = HEADER_SIZE[h]
    if body_end - off < size then
      if trimmed then break end  -- the trim cut here
      truncated(root, tvb, HEADER_LABEL[h], off, size, body_end - off)
      pinfo.cols.info:set(summary .. " [truncated]")
      return
    end
    if off + size > clen then
      capture_limited(root, tvb, HEADER_LABEL[h], off, size, clen - off)
      pinfo.cols.info:set(summary .. " [capture truncated]")
      return
    end
    local r = tvb(off, size)
    dissect_header[h](root:add(r, HEADER_LABEL[h]), r)
    off = off + size
  end

  local payload_len = body_end - off
  if not trimmed then
    if pad > payload_len then
      pad_item:add_proto_expert_info(ef.bad_pad, string.format(
        "pad count %d exceeds the %d bytes after the headers at offset %d", pad, payload_len,
        tvb:offset() + off))
      pinfo.cols.info:set(summary .. " [bad pad]")
      return
    end
    payload_len = payload_len - pad
  end
  if payload_len > 0 and off + payload_len <= clen then
    root:add(f.payload, tvb(off, payload_len))
  end
  root:add(f.payload_len, payload_len):set_generated()
  if not trimmed then
    if pad > 0 and off + payload_len + pad <= clen then
      root:add(f.pad_bytes, tvb(off + payload_len, pad))
    end
    if body_end + ICRC_BYTES <= clen then
      local icrc_item = root:add_le(f.icrc, tvb(body_end, ICRC_BYTES))
      local stored = tvb(body_end, ICRC_BYTES):le_uint()
      local computed = nil
      if mrc.prefs.verify_icrc and layers then computed = compute_icrc(tvb, layers, body_end) end
      if computed then
        root:add(f.icrc_computed, computed):set_generated()
        root:add(f.icrc_ok, computed == stored):set_generated()
        if computed ~= stored then
          icrc_item:add_proto_expert_info(ef.icrc_bad, string.format(
            "ICRC 0x%08x, computed 0x%08x", stored, computed))
          summary = summary .. " [bad ICRC]"
        end
      elseif mrc.prefs.verify_icrc then
        icrc_item:add_proto_expert_info(ef.icrc_unverified,
                                        "ICRC not verified: IP/UDP headers or bytes not available")
      end
    else
      capture_limited(root, tvb, "ICRC", body_end, ICRC_BYTES, math.max(clen - body_end, 0))
    end
  end
  if #info > 0 then summary = summary .. " " .. table.concat(info, " ") end
  if payload_len > 0 then summary = summary .. " len=" .. payload_len end
  if trimmed then summary = summary .. " TRIMMED" end
  pinfo.cols.info:set(summary)
end

----------------------------------------------------------------------------------------------
-- Registration: take over UDP 4791 and chain to the dissector that owned it.
----------------------------------------------------------------------------------------------

local udp_port_table = DissectorTable.get("udp.port")
local original = udp_port_table:get_dissector(ROCE_PORT)
local data_dissector = Dissector.get("data")
apply_profile(mrc.prefs.profile)

function mrc.dissector(tvb, pinfo, tree)
  local is_mrc = tvb:len() >= 1 and OPCODE_NAMES[tvb(0, 1):uint()] ~= nil
  -- On a packet cut by the capture's snap length the built-in dissector may read past the
  -- captured bytes, an exception that Dissector:call does not turn into a Lua error: it would
  -- unwind through this function and lose the MRC tree. Hand it only the captured bytes, so it
  -- reports a malformed packet instead.
  local ib_tvb = tvb
  if is_mrc and tvb:len() < tvb:reported_len() then ib_tvb = tvb:range(0, tvb:len()):tvb() end
  -- The built-in dissector also raises an exception on MRC packets it finds too short (it
  -- expects more bytes after a vendor BTH than a trimmed or truncated MRC packet has).
  -- Dissector:call turns that into a Lua error: catch it and report it on the packet.
  local ok_orig, err_orig = pcall(function()
    if original then
      original:call(ib_tvb, pinfo, tree)
    else
      data_dissector:call(ib_tvb, pinfo, tree)
    end
  end)
  local ok, err = true, nil
  if is_mrc then ok, err = pcall(dissect_mrc, tvb, pinfo, tree) end
  if not (ok and ok_orig) then
    -- Never let a Lua error reach Wireshark: report it on the packet instead.
    local item = tree:add(mrc, tvb())
    if not ok_orig then
      local why = tostring(err_orig):gsub("^.-Dissector_call: ", "")
      item:add_proto_expert_info(ef.builtin, "built-in InfiniBand dissector: " .. why)
    end
    if not ok then item:add_proto_expert_info(ef.internal, "MRC dissector: " .. tostring(err)) end
  end
  return tvb:len()
end

-- The profile's ports (4791 unless a profile file says otherwise); a changed preference
-- re-registers them.
local registered = {}
local function register_ports()
  for _, port in ipairs(registered) do udp_port_table:remove(port, mrc) end
  registered = {}
  for _, port in ipairs(wire.ports) do
    udp_port_table:add(port, mrc)
    registered[#registered + 1] = port
  end
end
register_ports()

function mrc.prefs_changed()
  apply_profile(mrc.prefs.profile)
  register_ports()
end
