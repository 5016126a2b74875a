// Presentation of decoded frames: one-line summaries, a field tree, and JSON objects with the
// field names of the decoder contract (docs/architecture.md).
#include <arpa/inet.h>

#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "wire/wire.h"

namespace mrc::wire {

std::string format_ipv6(const Ipv6Addr& a) {
  char buf[INET6_ADDRSTRLEN];
  inet_ntop(AF_INET6, a.data(), buf, sizeof buf);
  return buf;
}

std::string format_ipv4(const Ipv4Addr& a) {
  char buf[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, a.data(), buf, sizeof buf);
  return buf;
}

std::optional<Ipv6Addr> parse_ipv6(std::string_view s) {
  std::string z(s);
  Ipv6Addr a{};
  if (inet_pton(AF_INET6, z.c_str(), a.data()) != 1) return std::nullopt;
  return a;
}

std::optional<Ipv4Addr> parse_ipv4(std::string_view s) {
  std::string z(s);
  Ipv4Addr a{};
  if (inet_pton(AF_INET, z.c_str(), a.data()) != 1) return std::nullopt;
  return a;
}

namespace {

void appendf(std::string& out, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void appendf(std::string& out, const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  const int n = std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n > 0) out.append(buf, std::min<size_t>(static_cast<size_t>(n), sizeof buf - 1));
}

std::string src_of(const DecodedFrame& f) {
  if (f.l3 == 4) return format_ipv4(f.ip4.src);
  if (f.l3 == 6) return format_ipv6(f.ip6.src);
  return {};
}
std::string dst_of(const DecodedFrame& f) {
  if (f.l3 == 4) return format_ipv4(f.ip4.dst);
  if (f.l3 == 6) return format_ipv6(f.ip6.dst);
  return {};
}

std::string mac(const MacAddr& m) {
  char buf[18];
  std::snprintf(buf, sizeof buf, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4],
                m[5]);
  return buf;
}

std::string_view opcode_name(const DecodedFrame& f) {
  return f.op ? f.op->name : "UNKNOWN";
}

// Reserved fields are shown only when non-zero (a conforming frame has none): " reserved<name>
// 0x.." in the field tree, "<hdr>.reserved<name>" in JSON.
void reserved(std::string& out, const char* name, uint32_t v) {
  if (v) appendf(out, " reserved%s 0x%x", name, v);
}

template <size_t N>
bool any_set(const std::array<uint8_t, N>& a) {
  for (uint8_t b : a)
    if (b) return true;
  return false;
}

template <size_t N>
std::string hex_bytes(const std::array<uint8_t, N>& a) {
  std::string s;
  for (uint8_t b : a) appendf(s, "%02x", b);
  return s;
}

// JSON writer for one flat object; keys are fixed ASCII, strings are escaped.
class Json {
 public:
  explicit Json(std::string& out) : out_(out) { out_ += '{'; }
  ~Json() { out_ += '}'; }
  void key(const char* k) {
    if (!first_) out_ += ',';
    first_ = false;
    out_ += '"';
    out_ += k;
    out_ += "\":";
  }
  void num(const char* k, uint64_t v) {
    key(k);
    appendf(out_, "%" PRIu64, v);
  }
  void snum(const char* k, int64_t v) {
    key(k);
    appendf(out_, "%" PRId64, v);
  }
  void boolean(const char* k, bool v) {
    key(k);
    out_ += v ? "true" : "false";
  }
  void str(const char* k, std::string_view v) {
    key(k);
    out_ += '"';
    for (char c : v) {
      if (c == '"' || c == '\\') {
        out_ += '\\';
        out_ += c;
      } else if (static_cast<unsigned char>(c) < 0x20) {
        appendf(out_, "\\u%04x", c);
      } else {
        out_ += c;
      }
    }
    out_ += '"';
  }
  void raw(const char* k, std::string_view v) {
    key(k);
    out_ += v;
  }

 private:
  std::string& out_;
  bool first_ = true;
};

}  // namespace

void append_summary(std::string& out, const DecodedFrame& f) {
  if (f.l3 == 0) {
    if (f.has_eth)
      appendf(out, "%s > %s ethertype 0x%04x", mac(f.eth.src).c_str(), mac(f.eth.dst).c_str(),
              f.eth.ethertype);
  } else {
    out += src_of(f);
    out += " > ";
    out += dst_of(f);
    if (f.has_srh) appendf(out, " SRH sl=%u", f.srh.segments_left);
    if (f.has_inner_ip6) {
      out += " [";
      out += format_ipv6(f.inner_ip6.src);
      out += " > ";
      out += format_ipv6(f.inner_ip6.dst);
      out += "]";
    }
    if (f.has_udp) appendf(out, " UDP %u > %u", f.udp.sport, f.udp.dport);
  }
  if (f.roce) {
    appendf(out, " %s qp=0x%06x psn=%u", std::string(opcode_name(f)).c_str(), f.bth.dest_qp,
            f.bth.psn);
    if (f.bth.ack_req) out += " A";
    if (f.bth.rtx) out += " RTX";
    if (f.has(kHdrMeth)) appendf(out, " msn=%u rqmsn=%u", f.meth.msn, f.meth.rqmsn);
    if (f.has(kHdrReth))
      appendf(out, " va=0x%" PRIx64 " rkey=0x%x len=%u", f.reth.va, f.reth.rkey, f.reth.dma_len);
    if (f.has(kHdrImm)) appendf(out, " imm=0x%08x", f.immdt.imm);
    if (f.has(kHdrAeth)) appendf(out, " syndrome=0x%02x msn=%u", f.aeth.syndrome, f.aeth.msn);
    if (f.has(kHdrSeth))
      appendf(out, " cack=%u sack=+%d/0x%016" PRIx64 " ev=0x%08x m=%u%s", f.seth.cack_psn,
              f.seth.sack_offset, f.seth.sack_bitmap, f.seth.entropy, f.seth.m,
              f.seth.pr ? " PR" : "");
    if (f.has(kHdrNeth))
      appendf(out, " %s nack_psn=%u ev=0x%08x",
              std::string(nack_code_name(f.neth.nack_code)).c_str(), f.neth.nack_psn,
              f.neth.entropy);
    if (f.has(kHdrPeth)) appendf(out, " probe_id=%u", f.peth.probe_id);
    if (f.has(kHdrErth)) appendf(out, " op=%s", f.erth.op == 1 ? "EV_PROBE" : "PORT_STATUS_UPDATE");
    if (f.has(kHdrEeth))
      appendf(out, " op=%s ev=0x%08x", f.eeth.op == 1 ? "EV_PROBE" : "PORT_STATUS_UPDATE",
              f.eeth.entropy);
    if (f.payload.size()) appendf(out, " payload=%zu", f.payload.size());
    if (f.trimmed) out += " TRIMMED";
    if (f.icrc_checked) out += f.icrc_ok ? " icrc=ok" : " icrc=BAD";
  } else if (f.has_udp) {
    appendf(out, " len=%u", f.udp.length);
  }
  if (f.error) {
    out += " [";
    out += f.error.describe();
    out += "]";
  }
}

void append_field_tree(std::string& out, const DecodedFrame& f) {
  if (f.has_eth) {
    appendf(out, "  Ethernet: dst %s src %s type 0x%04x\n", mac(f.eth.dst).c_str(),
            mac(f.eth.src).c_str(), f.eth.ethertype);
    if (f.eth.has_vlan)
      appendf(out, "  VLAN: pcp %u dei %u vid %u\n", f.eth.vlan_tci >> 13,
              (f.eth.vlan_tci >> 12) & 1, f.eth.vlan_tci & 0xFFF);
  }
  if (f.l3 == 4) {
    const Ipv4Header& h = f.ip4;
    appendf(out,
            "  IPv4: %s > %s ihl %u dscp %u ecn %u len %u id %u flags 0x%x frag_offset %u ttl %u "
            "proto %u csum 0x%04x options %zu\n",
            format_ipv4(h.src).c_str(), format_ipv4(h.dst).c_str(), h.ihl, h.dscp, h.ecn,
            h.total_length, h.id, h.flags_frag >> 13, h.flags_frag & 0x1FFF, h.ttl, h.protocol,
            h.checksum, h.options.size());
  }
  auto v6 = [&out](const char* name, const Ipv6Header& h) {
    appendf(out, "  %s: %s > %s dscp %u ecn %u flow_label 0x%05x plen %u nh %u hlim %u\n", name,
            format_ipv6(h.src).c_str(), format_ipv6(h.dst).c_str(), h.dscp, h.ecn, h.flow_label,
            h.payload_length, h.next_header, h.hop_limit);
  };
  if (f.l3 == 6) v6("IPv6", f.ip6);
  if (f.has_srh) {
    const Srh& s = f.srh;
    appendf(
        out,
        "  SRH: nh %u hdr_ext_len %u type %u segments_left %u last_entry %u flags 0x%02x tag %u\n",
        s.next_header, s.hdr_ext_len, s.routing_type, s.segments_left, s.last_entry, s.flags,
        s.tag);
    for (unsigned i = 0; i < s.segment_count; ++i)
      appendf(out, "    segment[%u]: %s\n", i, format_ipv6(s.segments[i]).c_str());
    if (!s.tlvs.empty()) appendf(out, "    tlvs: %zu bytes\n", s.tlvs.size());
  }
  if (f.has_inner_ip6) v6("inner IPv6", f.inner_ip6);
  if (f.has_udp)
    appendf(out, "  UDP: sport %u dport %u len %u csum 0x%04x\n", f.udp.sport, f.udp.dport,
            f.udp.length, f.udp.checksum);
  if (f.roce) {
    const Bth& b = f.bth;
    appendf(out,
            "  BTH: opcode 0x%02x (%s) se %u m %u pad %u tver %u pkey 0x%04x variant 0x%02x "
            "dest_qp 0x%06x a %u rtx %u ts %u psn %u",
            b.opcode, std::string(opcode_name(f)).c_str(), b.se, b.mig_req, b.pad_count, b.tver,
            b.pkey, b.variant, b.dest_qp, b.ack_req, b.rtx, b.ts, b.psn);
    reserved(out, "b8_6", b.rsvd_b8_6);
    reserved(out, "b8_lo", b.rsvd_b8_lo);
    out += '\n';
  }
  if (f.has(kHdrMeth)) appendf(out, "  METH: rqmsn %u msn %u\n", f.meth.rqmsn, f.meth.msn);
  if (f.has(kHdrTseth)) {
    appendf(out, "  TSETH: ts16 %u tsr %u ftype %u", f.tseth.ts16, f.tseth.tsr, f.tseth.ftype);
    reserved(out, "", f.tseth.reserved);
    out += '\n';
  }
  if (f.has(kHdrReth))
    appendf(out, "  RETH: va 0x%016" PRIx64 " rkey 0x%08x dma_len %u\n", f.reth.va, f.reth.rkey,
            f.reth.dma_len);
  if (f.has(kHdrImm)) appendf(out, "  ImmDt: 0x%08x\n", f.immdt.imm);
  if (f.has(kHdrAeth))
    appendf(out, "  AETH: syndrome 0x%02x msn %u\n", f.aeth.syndrome, f.aeth.msn);
  if (f.has(kHdrSeth)) {
    const Seth& s = f.seth;
    appendf(out,
            "  SETH: m %u pr %u ack_psn_offset %d entropy 0x%08x spdcid %u dpdcid %u port_status "
            "0x%02x "
            "cack_psn %u cc_type %u psv %u sva %u mpr %u sack_offset %d sack_bitmap 0x%016" PRIx64,
            s.m, s.pr, s.ack_psn_offset, s.entropy, s.spdcid, s.dpdcid, s.port_status, s.cack_psn,
            s.cc_type, s.psv, s.sva, s.mpr, s.sack_offset, s.sack_bitmap);
    reserved(out, "byte0", s.byte0);
    reserved(out, "b1", s.rsvd_b1);
    reserved(out, "cc_flags", s.cc_flags_rsvd);
    out += '\n';
  }
  if (f.has(kHdrCcState)) {
    const CcState& c = f.cc_state;
    appendf(out, "  CC_STATE: ts_echo %u ooo_count %u rc %u rcv_cwnd_pen %u rcvd_bytes %u",
            c.ts_echo, c.ooo_count, c.rc, c.rcv_cwnd_pen, c.rcvd_bytes);
    reserved(out, "", c.rsvd_bit);
    out += '\n';
  }
  if (f.has(kHdrNeth)) {
    const Neth& n = f.neth;
    appendf(out,
            "  NETH: code 0x%02x (%s) vendor %u entropy 0x%08x spdcid %u dpdcid %u nack_psn %u "
            "cc_type %u psv %u sva %u m %u ts_echo %u",
            n.nack_code, std::string(nack_code_name(n.nack_code)).c_str(), n.vendor_code, n.entropy,
            n.spdcid, n.dpdcid, n.nack_psn, n.cc_type, n.psv, n.sva, n.m, n.ts_echo);
    reserved(out, "0", n.reserved0);
    reserved(out, "12", n.reserved12);
    reserved(out, "cc_flags", n.cc_flags_rsvd);
    reserved(out, "17", n.reserved17);
    out += '\n';
  }
  if (f.has(kHdrPeth)) {
    const Peth& p = f.peth;
    appendf(out, "  PETH: vendor %u probe_id %u spdcid %u dpdcid %u ts16 %u tsr %u ftype %u",
            p.vendor, p.probe_id, p.spdcid, p.dpdcid, p.ts16, p.tsr, p.ftype);
    reserved(out, "0",
             static_cast<uint32_t>(p.reserved0[0] << 16 | p.reserved0[1] << 8 | p.reserved0[2]));
    reserved(out, "6", p.reserved6);
    reserved(out, "tsr", p.reserved_tsr);
    out += '\n';
  }
  if (f.has(kHdrErth)) {
    const Erth& e = f.erth;
    appendf(out, "  ERTH: op %u vendor %u port_status_mask 0x%08x ts16 %u tsr %u ftype %u", e.op,
            e.vendor, e.port_status_mask, e.ts16, e.tsr, e.ftype);
    reserved(out, "0", e.reserved0);
    reserved(out, "b1", e.rsvd_b1);
    reserved(out, "2", e.reserved2);
    reserved(out, "8", e.reserved8);
    reserved(out, "tsr", e.reserved_tsr);
    out += '\n';
  }
  if (f.has(kHdrEeth)) {
    const Eeth& e = f.eeth;
    appendf(out,
            "  EETH: op %u sva %u status %u vendor %u entropy 0x%08x port_status_mask 0x%08x "
            "ts_echo %u svc_time %u",
            e.op, e.sva, e.status, e.vendor, e.entropy, e.port_status_mask, e.ts_echo, e.svc_time);
    reserved(out, "0", e.reserved0);
    reserved(out, "b1", e.rsvd_b1);
    if (any_set(e.reserved12)) out += " reserved12 " + hex_bytes(e.reserved12);
    reserved(out, "32", e.reserved32);
    out += '\n';
  }
  if (f.has(kHdrAtomicEth))
    appendf(out,
            "  AtomicETH: va 0x%016" PRIx64 " rkey 0x%08x swap_add %" PRIu64 " compare %" PRIu64
            "\n",
            f.atomic_eth.va, f.atomic_eth.rkey, f.atomic_eth.swap_add, f.atomic_eth.compare);
  if (f.has(kHdrAtomicAckEth))
    appendf(out, "  AtomicAckETH: orig %" PRIu64 "\n", f.atomic_ack_eth.orig);
  if (f.has(kHdrIeth)) appendf(out, "  IETH: rkey 0x%08x\n", f.ieth);
  if (f.roce) {
    appendf(out, "  payload: %zu bytes, pad %u%s\n", f.payload.size(), f.pad_bytes,
            f.trimmed ? " (trimmed)" : "");
    if (f.has_icrc)
      appendf(out, "  ICRC: 0x%08x%s\n", f.icrc,
              f.icrc_checked ? (f.icrc_ok ? " (ok)" : " (BAD)") : "");
  }
  if (f.error) appendf(out, "  error: %s\n", f.error.describe().c_str());
}

void append_json(std::string& out, const DecodedFrame& f, uint64_t frame_no, uint64_t ts_ns,
                 const WireProfile& profile) {
  Json j(out);
  j.num("frame", frame_no);
  j.num("ts_ns", ts_ns);
  j.num("len", f.frame.size());
  j.boolean("roce", f.roce);
  if (f.has_eth) {
    j.str("eth.src", mac(f.eth.src));
    j.str("eth.dst", mac(f.eth.dst));
    j.num("eth.type", f.eth.ethertype);
    if (f.eth.has_vlan) {
      j.num("vlan.id", f.eth.vlan_tci & 0xFFF);
      j.num("vlan.pcp", f.eth.vlan_tci >> 13);
      j.num("vlan.dei", (f.eth.vlan_tci >> 12) & 1);
    }
  }
  if (f.l3) {
    j.num("l3", f.l3);
    j.str("src", src_of(f));
    j.str("dst", dst_of(f));
    j.num("dscp", f.dscp());
    j.num("ecn", f.ecn());
    j.num("flow_label", f.flow_label());
    if (f.l3 == 4) {
      const Ipv4Header& h = f.ip4;
      j.num("ttl", h.ttl);
      j.num("ip4.ihl", h.ihl);
      j.num("ip4.total_length", h.total_length);
      j.num("ip4.id", h.id);
      j.num("ip4.flags", h.flags_frag >> 13);
      j.num("ip4.frag_offset", h.flags_frag & 0x1FFF);
      j.num("ip4.protocol", h.protocol);
      j.num("ip4.checksum", h.checksum);
      if (!h.options.empty()) j.num("ip4.options_len", h.options.size());
    }
    if (f.l3 == 6) {
      j.num("hop_limit", f.ip6.hop_limit);
      j.num("ip6.payload_length", f.ip6.payload_length);
      j.num("ip6.next_header", f.ip6.next_header);
    }
  }
  if (f.has_srh) {
    j.num("srh.next_header", f.srh.next_header);
    j.num("srh.hdr_ext_len", f.srh.hdr_ext_len);
    j.num("srh.routing_type", f.srh.routing_type);
    j.num("srh.segments_left", f.srh.segments_left);
    j.num("srh.last_entry", f.srh.last_entry);
    j.num("srh.flags", f.srh.flags);
    j.num("srh.tag", f.srh.tag);
    if (!f.srh.tlvs.empty()) j.num("srh.tlvs_len", f.srh.tlvs.size());
    std::string segs = "[";
    for (unsigned i = 0; i < f.srh.segment_count; ++i) {
      if (i) segs += ',';
      segs += '"' + format_ipv6(f.srh.segments[i]) + '"';
    }
    segs += ']';
    j.raw("srh.segments", segs);
  }
  if (f.has_inner_ip6) {
    j.str("inner.src", format_ipv6(f.inner_ip6.src));
    j.str("inner.dst", format_ipv6(f.inner_ip6.dst));
    j.num("inner.flow_label", f.inner_ip6.flow_label);
    j.num("inner.dscp", f.inner_ip6.dscp);
    j.num("inner.ecn", f.inner_ip6.ecn);
    j.num("inner.payload_length", f.inner_ip6.payload_length);
    j.num("inner.next_header", f.inner_ip6.next_header);
    j.num("inner.hop_limit", f.inner_ip6.hop_limit);
  }
  if (f.has_udp) {
    j.num("sport", f.udp.sport);
    j.num("dport", f.udp.dport);
    j.num("udp.length", f.udp.length);
    j.num("udp.checksum", f.udp.checksum);
  }
  if (f.roce) {
    const Bth& b = f.bth;
    j.num("opcode", b.opcode);
    j.str("opcode_name", opcode_name(f));
    j.num("dest_qp", b.dest_qp);
    j.num("psn", b.psn);
    j.boolean("se", b.se);
    j.boolean("mig_req", b.mig_req);
    j.num("pad", b.pad_count);
    j.num("tver", b.tver);
    j.num("pkey", b.pkey);
    j.boolean("ack_req", b.ack_req);
    j.boolean("rtx", b.rtx);
    j.boolean("ts", b.ts);
    j.num("bth.variant", b.variant);
    if (b.rsvd_b8_6) j.num("bth.reserved_b8_6", 1);
    if (b.rsvd_b8_lo) j.num("bth.reserved_b8_lo", b.rsvd_b8_lo);
    const uint32_t fl = f.has_inner_ip6 ? f.inner_ip6.flow_label : f.flow_label();
    EvFormat fmt = f.ev_format();
    if (fmt == EvFormat::kStev && profile.params().ecmp_flow_label == EcmpFlowLabel::kEv &&
        fl == f.udp.sport)
      fmt = EvFormat::kUdp;  // the 16-bit EV repeated in the flow label
    j.str("ev_format", ev_format_name(fmt));
    j.num("wev", wev_from_carriage(profile.params(), fmt, f.udp.sport, fl));
  }
  if (f.has(kHdrMeth)) {
    j.num("meth.rqmsn", f.meth.rqmsn);
    j.num("meth.msn", f.meth.msn);
  }
  if (f.has(kHdrTseth)) {
    j.num("tseth.ts16", f.tseth.ts16);
    j.num("tseth.tsr", f.tseth.tsr);
    j.num("tseth.ftype", f.tseth.ftype);
    if (f.tseth.reserved) j.num("tseth.reserved", f.tseth.reserved);
  }
  if (f.has(kHdrReth)) {
    j.num("reth.va", f.reth.va);
    j.num("reth.rkey", f.reth.rkey);
    j.num("reth.len", f.reth.dma_len);
  }
  if (f.has(kHdrImm)) j.num("imm", f.immdt.imm);
  if (f.has(kHdrAeth)) {
    j.num("aeth.syndrome", f.aeth.syndrome);
    j.num("aeth.msn", f.aeth.msn);
  }
  if (f.has(kHdrSeth)) {
    const Seth& s = f.seth;
    j.num("seth.m", s.m);
    j.boolean("seth.pr", s.pr);
    j.snum("seth.ack_psn_offset", s.ack_psn_offset);
    j.num("seth.entropy", s.entropy);
    j.num("seth.spdcid", s.spdcid);
    j.num("seth.dpdcid", s.dpdcid);
    j.num("seth.port_status", s.port_status);
    j.num("seth.cack_psn", s.cack_psn);
    j.num("seth.cc_type", s.cc_type);
    j.boolean("seth.psv", s.psv);
    j.boolean("seth.sva", s.sva);
    j.num("seth.mpr", s.mpr);
    j.snum("seth.sack_offset", s.sack_offset);
    j.num("seth.sack_bitmap", s.sack_bitmap);
    if (s.byte0) j.num("seth.reserved_byte0", s.byte0);
    if (s.rsvd_b1) j.num("seth.reserved_b1", s.rsvd_b1);
    if (s.cc_flags_rsvd) j.num("seth.reserved_cc_flags", s.cc_flags_rsvd);
  }
  if (f.has(kHdrCcState)) {
    const CcState& c = f.cc_state;
    j.num("cc.ts_echo", c.ts_echo);
    j.num("cc.ooo_count", c.ooo_count);
    j.boolean("cc.rc", c.rc);
    j.num("cc.rcv_cwnd_pen", c.rcv_cwnd_pen);
    j.num("cc.rcvd_bytes", c.rcvd_bytes);
    if (c.rsvd_bit) j.num("cc.reserved", 1);
  }
  if (f.has(kHdrNeth)) {
    const Neth& n = f.neth;
    j.num("neth.code", n.nack_code);
    j.str("neth.code_name", nack_code_name(n.nack_code));
    j.num("neth.vendor_code", n.vendor_code);
    j.num("neth.entropy", n.entropy);
    j.num("neth.spdcid", n.spdcid);
    j.num("neth.dpdcid", n.dpdcid);
    j.num("neth.nack_psn", n.nack_psn);
    j.num("neth.cc_type", n.cc_type);
    j.boolean("neth.psv", n.psv);
    j.num("neth.m", n.m);
    j.boolean("neth.sva", n.sva);
    j.num("neth.ts_echo", n.ts_echo);
    if (n.reserved0) j.num("neth.reserved0", n.reserved0);
    if (n.reserved12) j.num("neth.reserved12", n.reserved12);
    if (n.cc_flags_rsvd) j.num("neth.reserved_cc_flags", n.cc_flags_rsvd);
    if (n.reserved17) j.num("neth.reserved17", n.reserved17);
  }
  if (f.has(kHdrPeth)) {
    const Peth& p = f.peth;
    j.num("peth.probe_id", p.probe_id);
    j.num("peth.spdcid", p.spdcid);
    j.num("peth.dpdcid", p.dpdcid);
    j.num("peth.ts16", p.ts16);
    j.boolean("peth.tsr", p.tsr);
    j.num("peth.ftype", p.ftype);
    j.num("peth.vendor", p.vendor);
    const uint32_t r0 =
        static_cast<uint32_t>(p.reserved0[0] << 16 | p.reserved0[1] << 8 | p.reserved0[2]);
    if (r0) j.num("peth.reserved0", r0);
    if (p.reserved6) j.num("peth.reserved6", p.reserved6);
    if (p.reserved_tsr) j.num("peth.reserved_tsr", p.reserved_tsr);
  }
  if (f.has(kHdrErth)) {
    const Erth& e = f.erth;
    j.num("erth.op", e.op);
    j.num("erth.port_status_mask", e.port_status_mask);
    j.num("erth.ts16", e.ts16);
    j.boolean("erth.tsr", e.tsr);
    j.num("erth.ftype", e.ftype);
    j.num("erth.vendor", e.vendor);
    if (e.reserved0) j.num("erth.reserved0", e.reserved0);
    if (e.rsvd_b1) j.num("erth.reserved_b1", e.rsvd_b1);
    if (e.reserved2) j.num("erth.reserved2", e.reserved2);
    if (e.reserved8) j.num("erth.reserved8", e.reserved8);
    if (e.reserved_tsr) j.num("erth.reserved_tsr", e.reserved_tsr);
  }
  if (f.has(kHdrEeth)) {
    const Eeth& e = f.eeth;
    j.num("eeth.op", e.op);
    j.boolean("eeth.sva", e.sva);
    j.num("eeth.status", e.status);
    j.num("eeth.entropy", e.entropy);
    j.num("eeth.port_status_mask", e.port_status_mask);
    j.num("eeth.ts_echo", e.ts_echo);
    j.num("eeth.svc_time", e.svc_time);
    j.num("eeth.vendor", e.vendor);
    if (e.reserved0) j.num("eeth.reserved0", e.reserved0);
    if (e.rsvd_b1) j.num("eeth.reserved_b1", e.rsvd_b1);
    if (any_set(e.reserved12)) j.str("eeth.reserved12", hex_bytes(e.reserved12));
    if (e.reserved32) j.num("eeth.reserved32", e.reserved32);
  }
  if (f.has(kHdrAtomicEth)) {
    j.num("atomic.va", f.atomic_eth.va);
    j.num("atomic.rkey", f.atomic_eth.rkey);
    j.num("atomic.swap_add", f.atomic_eth.swap_add);
    j.num("atomic.compare", f.atomic_eth.compare);
  }
  if (f.has(kHdrAtomicAckEth)) j.num("atomic_ack.orig", f.atomic_ack_eth.orig);
  if (f.has(kHdrIeth)) j.num("ieth.rkey", f.ieth);
  if (f.roce) {
    j.num("payload_len", f.payload.size());
    j.num("pad_bytes", f.pad_bytes);
    j.boolean("trimmed", f.trimmed);
    if (f.has_icrc) {
      j.num("icrc", f.icrc);
      if (f.icrc_checked) j.boolean("icrc_ok", f.icrc_ok);
    }
  }
  if (f.error) j.str("error", f.error.describe());
}

}  // namespace mrc::wire
