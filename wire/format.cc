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
      appendf(out, "  VLAN: pcp %u vid %u\n", f.eth.vlan_tci >> 13, f.eth.vlan_tci & 0xFFF);
  }
  if (f.l3 == 4) {
    const Ipv4Header& h = f.ip4;
    appendf(out,
            "  IPv4: %s > %s dscp %u ecn %u len %u id %u flags 0x%x ttl %u proto %u csum 0x%04x\n",
            format_ipv4(h.src).c_str(), format_ipv4(h.dst).c_str(), h.dscp, h.ecn, h.total_length,
            h.id, h.flags_frag >> 13, h.ttl, h.protocol, h.checksum);
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
  }
  if (f.has_inner_ip6) v6("inner IPv6", f.inner_ip6);
  if (f.has_udp)
    appendf(out, "  UDP: sport %u dport %u len %u csum 0x%04x\n", f.udp.sport, f.udp.dport,
            f.udp.length, f.udp.checksum);
  if (f.roce) {
    const Bth& b = f.bth;
    appendf(out,
            "  BTH: opcode 0x%02x (%s) se %u m %u pad %u tver %u pkey 0x%04x dest_qp 0x%06x a %u "
            "rtx %u ts %u psn %u\n",
            b.opcode, std::string(opcode_name(f)).c_str(), b.se, b.mig_req, b.pad_count, b.tver,
            b.pkey, b.dest_qp, b.ack_req, b.rtx, b.ts, b.psn);
  }
  if (f.has(kHdrMeth)) appendf(out, "  METH: rqmsn %u msn %u\n", f.meth.rqmsn, f.meth.msn);
  if (f.has(kHdrTseth))
    appendf(out, "  TSETH: ts16 %u tsr %u ftype %u\n", f.tseth.ts16, f.tseth.tsr, f.tseth.ftype);
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
            "cack_psn %u cc_type %u psv %u sva %u mpr %u sack_offset %d sack_bitmap 0x%016" PRIx64
            "\n",
            s.m, s.pr, s.ack_psn_offset, s.entropy, s.spdcid, s.dpdcid, s.port_status, s.cack_psn,
            s.cc_type, s.psv, s.sva, s.mpr, s.sack_offset, s.sack_bitmap);
  }
  if (f.has(kHdrCcState)) {
    const CcState& c = f.cc_state;
    appendf(out, "  CC_STATE: ts_echo %u ooo_count %u rc %u rcv_cwnd_pen %u rcvd_bytes %u\n",
            c.ts_echo, c.ooo_count, c.rc, c.rcv_cwnd_pen, c.rcvd_bytes);
  }
  if (f.has(kHdrNeth)) {
    const Neth& n = f.neth;
    appendf(out,
            "  NETH: code 0x%02x (%s) vendor %u entropy 0x%08x spdcid %u dpdcid %u nack_psn %u m "
            "%u ts_echo %u\n",
            n.nack_code, std::string(nack_code_name(n.nack_code)).c_str(), n.vendor_code, n.entropy,
            n.spdcid, n.dpdcid, n.nack_psn, n.m, n.ts_echo);
  }
  if (f.has(kHdrPeth)) {
    const Peth& p = f.peth;
    appendf(out, "  PETH: probe_id %u spdcid %u dpdcid %u ts16 %u ftype %u\n", p.probe_id, p.spdcid,
            p.dpdcid, p.ts16, p.ftype);
  }
  if (f.has(kHdrErth)) {
    const Erth& e = f.erth;
    appendf(out, "  ERTH: op %u port_status_mask 0x%08x ts16 %u ftype %u\n", e.op,
            e.port_status_mask, e.ts16, e.ftype);
  }
  if (f.has(kHdrEeth)) {
    const Eeth& e = f.eeth;
    appendf(out,
            "  EETH: op %u sva %u status %u entropy 0x%08x port_status_mask 0x%08x ts_echo %u "
            "svc_time %u\n",
            e.op, e.sva, e.status, e.entropy, e.port_status_mask, e.ts_echo, e.svc_time);
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
    if (f.eth.has_vlan) j.num("vlan.id", f.eth.vlan_tci & 0xFFF);
  }
  if (f.l3) {
    j.num("l3", f.l3);
    j.str("src", src_of(f));
    j.str("dst", dst_of(f));
    j.num("dscp", f.dscp());
    j.num("ecn", f.ecn());
    j.num("flow_label", f.flow_label());
    if (f.l3 == 4) j.num("ttl", f.ip4.ttl);
    if (f.l3 == 6) j.num("hop_limit", f.ip6.hop_limit);
  }
  if (f.has_srh) {
    j.num("srh.segments_left", f.srh.segments_left);
    j.num("srh.last_entry", f.srh.last_entry);
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
  }
  if (f.has(kHdrCcState)) {
    const CcState& c = f.cc_state;
    j.num("cc.ts_echo", c.ts_echo);
    j.num("cc.ooo_count", c.ooo_count);
    j.boolean("cc.rc", c.rc);
    j.num("cc.rcv_cwnd_pen", c.rcv_cwnd_pen);
    j.num("cc.rcvd_bytes", c.rcvd_bytes);
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
    j.num("neth.m", n.m);
    j.boolean("neth.sva", n.sva);
    j.num("neth.ts_echo", n.ts_echo);
  }
  if (f.has(kHdrPeth)) {
    const Peth& p = f.peth;
    j.num("peth.probe_id", p.probe_id);
    j.num("peth.spdcid", p.spdcid);
    j.num("peth.dpdcid", p.dpdcid);
    j.num("peth.ts16", p.ts16);
    j.num("peth.ftype", p.ftype);
  }
  if (f.has(kHdrErth)) {
    const Erth& e = f.erth;
    j.num("erth.op", e.op);
    j.num("erth.port_status_mask", e.port_status_mask);
    j.num("erth.ts16", e.ts16);
    j.num("erth.ftype", e.ftype);
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
    j.boolean("trimmed", f.trimmed);
    if (f.has_icrc) {
      j.num("icrc", f.icrc);
      if (f.icrc_checked) j.boolean("icrc_ok", f.icrc_ok);
    }
  }
  if (f.error) j.str("error", f.error.describe());
}

}  // namespace mrc::wire
