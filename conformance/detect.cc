// mrct detect: which wire variant a capture speaks. Each open choice (WireParams) is inferred
// from evidence the capture must agree with, never from one frame alone:
//   ports       UDP datagrams whose payload decodes as an MRC packet with a valid ICRC;
//   stripe      the entropy a SACK/NACK/EV-probe response echoes, matched against the source
//               port and flow label of the data packets it answers under each hypothesis;
//   ECMP label  UDP-format frames whose flow label repeats the source port;
//   EETH op     the op bits under each position checked against the request's ERTH op and
//               against reserved bits that must be zero;
//   cc_type, SVA, trim size, control DSCP, SRv6 outer TC and WEV carriage: values seen.
// Parameters without evidence keep MRP0's value with confidence 0.
#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "conformance/check.h"

namespace mrc::check {
namespace {

using wire::DecodedFrame;
using wire::PacketKind;

// Counts of values, most common first.
template <typename T>
std::pair<T, uint64_t> top(const std::map<T, uint64_t>& m, uint64_t* total = nullptr) {
  std::pair<T, uint64_t> best{};
  uint64_t sum = 0;
  for (const auto& [v, n] : m) {
    sum += n;
    if (n > best.second) best = {v, n};
  }
  if (total) *total = sum;
  return best;
}

std::string ratio(uint64_t a, uint64_t b) {
  return std::to_string(a) + " of " + std::to_string(b);
}

}  // namespace

bool detect_variant(const std::vector<std::string>& captures, VariantGuess& out,
                    std::string& error) {
  out = VariantGuess{};
  const wire::WireProfile& base = wire::mrp0();
  // Per UDP destination port: datagrams, and those that decode as MRC with a valid ICRC (or as
  // trimmed MRC data, which has none).
  std::map<uint16_t, uint64_t> udp_frames, roce_frames, mrc_frames;
  // Data-packet carriage seen per RoCE destination: (sport, flow label[15:0]) pairs.
  struct Carriage {
    std::unordered_set<uint32_t> low;   // FL16<<16 | sport: the WEV under low_in_sport
    std::unordered_set<uint32_t> high;  // sport<<16 | FL16: the WEV under high_in_sport
    std::unordered_set<uint32_t> sport;
  };
  std::map<wire::Ipv6Addr, Carriage> by_dst;
  // Echoes (SACK/NACK entropy) per RoCE destination of the echo (= the data sender).
  std::vector<std::pair<wire::Ipv6Addr, uint32_t>> echoes;
  uint64_t udp_fmt_frames = 0, udp_fmt_fl_eq_sport = 0, udp_fmt_fl_zero = 0;
  std::map<uint8_t, uint64_t> cc_types;
  uint64_t sva_set = 0, sva_frames = 0;
  std::map<uint16_t, uint64_t> trim_sizes;
  std::map<uint8_t, uint64_t> control_dscp;
  uint64_t srv6_frames = 0, srv6_tc_copy = 0, srv6_tc_zero = 0, srv6_wev_zero = 0;
  // EETH: request op per request id (BTH PSN[15:0] of ERTH), then byte 1 of responses.
  std::unordered_map<uint32_t, uint8_t> erth_op;
  std::vector<std::pair<uint32_t, uint8_t>> eeth_b1;  // (req id, byte 1)

  auto to_addr = [](const DecodedFrame& f, wire::Ipv6Addr& a) {
    if (const wire::Ipv6Header* h = f.roce_ip6()) {
      a = h->dst;
      return true;
    }
    if (f.l3 == 4) {
      a = {};
      a[10] = a[11] = 0xFF;
      std::memcpy(a.data() + 12, f.ip4.dst.data(), 4);
      return true;
    }
    return false;
  };
  auto src_addr = [](const DecodedFrame& f, wire::Ipv6Addr& a) {
    if (const wire::Ipv6Header* h = f.roce_ip6()) {
      a = h->src;
      return true;
    }
    if (f.l3 == 4) {
      a = {};
      a[10] = a[11] = 0xFF;
      std::memcpy(a.data() + 12, f.ip4.src.data(), 4);
      return true;
    }
    return false;
  };

  for (const std::string& path : captures) {
    wire::CaptureReader rd;
    if (!rd.open(path)) {
      error = rd.error();
      return false;
    }
    wire::CaptureRecord rec;
    DecodedFrame f;
    while (rd.next(rec)) {
      ++out.frames;
      wire::DecodeOptions opt;
      opt.link = rec.link;
      opt.roce_port = 1;  // nothing is RoCE in this first pass: find the UDP port
      wire::decode_frame(rec.data, f, opt, base);
      if (!f.has_udp || f.error) continue;
      const uint16_t dport = f.udp.dport;
      ++udp_frames[dport];
      // Is it MRC when read as RoCE? A valid ICRC says so beyond doubt; a trimmed data packet
      // carries none, but then its DSCP is a trimmed class and its opcode MRC data.
      opt.roce_port = dport;
      opt.verify_icrc = true;
      if (!wire::decode_frame(rec.data, f, opt, base) || !f.roce || !f.op) continue;
      if (!(f.icrc_checked && f.icrc_ok) && !f.trimmed) continue;
      ++roce_frames[dport];
      if (!f.op->mrc) continue;
      ++mrc_frames[dport];
      ++out.mrc_frames;
      const PacketKind kind = f.op->kind;
      const wire::Ipv6Header* rip = f.roce_ip6();
      const uint32_t fl = rip ? rip->flow_label : 0;
      if (f.has_inner_ip6) {
        ++srv6_frames;
        const wire::Ipv6Header& in = f.inner_ip6;
        // A trimmed frame's outer class is the trimming switch's, not the sender's choice.
        if (!f.trimmed && (in.dscp != 0 || in.ecn != 0)) {
          if (f.ip6.dscp == in.dscp) ++srv6_tc_copy;
          if (f.ip6.dscp == 0 && f.ip6.ecn == 0) ++srv6_tc_zero;
        }
        if (f.udp.sport == 0 && fl == 0) ++srv6_wev_zero;
      }
      if (kind == PacketKind::kMrcData) {
        if (f.trimmed) ++trim_sizes[static_cast<uint16_t>(f.udp.length - 8)];
        wire::Ipv6Addr dst{};
        if (to_addr(f, dst)) {
          Carriage& c = by_dst[dst];
          const uint32_t fl16 = fl & 0xFFFF;
          c.low.insert(fl16 << 16 | f.udp.sport);
          c.high.insert(uint32_t{f.udp.sport} << 16 | fl16);
          c.sport.insert(f.udp.sport);
        }
        if (!f.has_inner_ip6 && f.l3 == 6) {  // IPv4 has no flow label to tell
          if (fl == 0) {
            ++udp_fmt_frames;
            ++udp_fmt_fl_zero;
          } else if (fl == f.udp.sport) {
            ++udp_fmt_frames;
            ++udp_fmt_fl_eq_sport;
          }  // else STEV: says nothing of the ECMP choice
        }
      }
      auto echo = [&](uint32_t entropy) {
        wire::Ipv6Addr a{};
        if (src_addr(f, a)) echoes.emplace_back(a, entropy);  // the data went to the echoer
      };
      if (kind == PacketKind::kMrcSack) {
        echo(f.seth.entropy);
        ++cc_types[f.seth.cc_type];
        ++sva_frames;
        sva_set += f.seth.sva;
        ++control_dscp[rip ? rip->dscp : f.dscp()];  // inner: SRv6 may zero the outer class
      } else if (kind == PacketKind::kMrcNack) {
        echo(f.neth.entropy);
        ++cc_types[f.neth.cc_type];
        ++sva_frames;
        sva_set += f.neth.sva;
        ++control_dscp[rip ? rip->dscp : f.dscp()];
      } else if (kind == PacketKind::kMrcEndpointRequest) {
        erth_op[f.bth.psn & 0xFFFF] = f.erth.op;
      } else if (kind == PacketKind::kMrcEndpointResponse) {
        const auto* b = reinterpret_cast<const uint8_t*>(rec.data.data());
        const size_t off = size_t{f.off_bth} + wire::kBthBytes;  // EETH follows the BTH
        if (off + 2 <= rec.data.size()) eeth_b1.emplace_back(f.bth.psn & 0xFFFF, b[off + 1]);
      }
    }
    if (!rd.error().empty()) {
      error = rd.error();
      return false;
    }
  }

  wire::WireParams& p = out.params;
  p.name = "detected";
  auto add = [&](std::string key, std::string value, double conf, std::string evidence) {
    out.confidence.push_back({std::move(key), std::move(value), conf, std::move(evidence)});
  };

  // Ports: every port that carried MRC; the one with most MRC frames first.
  {
    std::vector<std::pair<uint64_t, uint16_t>> ports;
    for (const auto& [port, n] : mrc_frames) ports.emplace_back(n, port);
    std::sort(ports.rbegin(), ports.rend());
    if (ports.empty()) {
      add("udp.ports", "4791", 0, "no UDP datagram decodes as MRC with a valid ICRC");
    } else {
      p.udp_ports.clear();
      uint64_t mrc = 0, all = 0;
      std::string v;
      for (const auto& [n, port] : ports) {
        p.udp_ports.push_back(port);
        mrc += n;
        all += roce_frames[port];
        v += (v.empty() ? "" : ", ") + std::to_string(port);
      }
      add("udp.ports", v, static_cast<double>(mrc) / static_cast<double>(all),
          ratio(mrc, all) + " RoCE datagrams with a valid ICRC to these ports are MRC");
    }
  }

  // Stripe: echoes of 32-bit EVs matched against data carriage under each hypothesis.
  {
    uint64_t low = 0, high = 0, n = 0;
    for (const auto& [dst, e] : echoes) {
      auto it = by_dst.find(dst);
      if (it == by_dst.end() || e <= 0xFFFF) continue;  // 16-bit EVs say nothing of the stripe
      const bool l = it->second.low.count(e) != 0, h = it->second.high.count(e) != 0;
      if (l == h) continue;  // both or neither: no evidence
      ++n;
      low += l;
      high += h;
    }
    if (n == 0) {
      add("ev.stripe", "low_in_sport", 0,
          "no SACK/NACK echoes a 32-bit EV of a data packet in the capture");
    } else {
      p.ev_stripe = high > low ? wire::EvStripe::kHighInSport : wire::EvStripe::kLowInSport;
      const uint64_t win = std::max(low, high);
      add("ev.stripe", high > low ? "high_in_sport" : "low_in_sport",
          static_cast<double>(win) / static_cast<double>(n),
          ratio(win, n) + " distinguishing echoes match the data packets' sport/flow label");
    }
  }

  // ECMP flow label (UDP format over IPv6).
  {
    const uint64_t n = udp_fmt_frames;
    if (n == 0 || udp_fmt_fl_eq_sport + udp_fmt_fl_zero == 0) {
      add("ev.ecmp_flow_label", "zero", 0, "no UDP-format IPv6 data packets");
    } else if (udp_fmt_fl_eq_sport > udp_fmt_fl_zero) {
      p.ecmp_flow_label = wire::EcmpFlowLabel::kEv;
      add("ev.ecmp_flow_label", "ev",
          static_cast<double>(udp_fmt_fl_eq_sport) / static_cast<double>(n),
          ratio(udp_fmt_fl_eq_sport, n) +
              " UDP-format IPv6 data packets carry the source port in the flow label");
    } else {
      add("ev.ecmp_flow_label", "zero",
          static_cast<double>(udp_fmt_fl_zero) / static_cast<double>(n),
          ratio(udp_fmt_fl_zero, n) + " UDP-format IPv6 data packets have flow label 0");
    }
  }

  // EETH op position: which reading agrees with the request op and leaves reserved bits 0.
  {
    auto consistent = [&](uint8_t b1, uint8_t shift, uint32_t id) {
      const uint8_t op = (b1 >> shift) & 3;
      if (op > 1) return false;  // PORT_STATUS_UPDATE 0, EV_PROBE 1
      if (auto it = erth_op.find(id); it != erth_op.end() && it->second != op) return false;
      // At most one bit besides the op (SVA) may be set.
      const uint8_t rest = static_cast<uint8_t>(b1 & ~(3u << shift));
      return (rest & (rest - 1)) == 0;
    };
    uint64_t n54 = 0, n32 = 0, n = 0;
    std::map<uint8_t, uint64_t> sva_bits;
    for (const auto& [id, b1] : eeth_b1) {
      const bool a = consistent(b1, 4, id), b = consistent(b1, 2, id);
      if (a == b) continue;
      ++n;
      n54 += a;
      n32 += b;
    }
    if (n == 0) {
      add("headers.eeth_op_bits", "5..4", 0,
          eeth_b1.empty() ? "no endpoint responses (EETH)"
                          : "every EETH reads the same under both positions (op 0, no SVA)");
    } else {
      p.eeth_op_shift = n32 > n54 ? 2 : 4;
      add("headers.eeth_op_bits", n32 > n54 ? "3..2" : "5..4",
          static_cast<double>(std::max(n54, n32)) / static_cast<double>(n),
          ratio(std::max(n54, n32), n) + " distinguishing EETHs agree with the request op");
    }
    for (const auto& [id, b1] : eeth_b1) {
      const uint8_t rest = static_cast<uint8_t>(b1 & ~(3u << p.eeth_op_shift));
      if (rest != 0 && (rest & (rest - 1)) == 0)
        ++sva_bits[static_cast<uint8_t>(__builtin_ctz(rest))];
    }
    if (p.eeth_op_shift == 2) p.eeth_sva_bit = 1;  // our choice when SVA is never seen there
    if (!sva_bits.empty()) {
      uint64_t total = 0;
      const auto [bit, cnt] = top(sva_bits, &total);
      p.eeth_sva_bit = bit;
      sva_set += cnt;  // an EETH flagging service time uses SVA too
      sva_frames += eeth_b1.size();
      add("headers.eeth_sva_bit", std::to_string(bit),
          static_cast<double>(cnt) / static_cast<double>(total),
          ratio(cnt, total) + " EETHs with a flag besides the op set this bit");
    } else {
      add("headers.eeth_sva_bit", std::to_string(p.eeth_sva_bit), 0,
          "no EETH sets a flag besides the op");
    }
  }

  // cc_type, SVA.
  if (cc_types.empty()) {
    add("headers.cc_type", "0", 0, "no SACK or NACK");
  } else {
    uint64_t total = 0;
    const auto [v, cnt] = top(cc_types, &total);
    p.cc_type = v;
    add("headers.cc_type", std::to_string(v), static_cast<double>(cnt) / static_cast<double>(total),
        ratio(cnt, total) + " SACK/NACK headers");
  }
  if (sva_set != 0) {
    p.sva = true;
    add("headers.sva", "true", 1, ratio(sva_set, sva_frames) + " SACK/NACK/EETH set SVA");
  } else {
    add("headers.sva", "true", 0,
        sva_frames ? "no SACK/NACK/EETH sets SVA (a DUT may simply not report service time)"
                   : "no SACK or NACK");
  }

  // Trim size.
  if (trim_sizes.empty()) {
    add("trim.bytes", std::to_string(p.trim_bytes), 0, "no trimmed data packets");
  } else {
    uint64_t total = 0;
    const auto [v, cnt] = top(trim_sizes, &total);
    p.trim_bytes = v;
    add("trim.bytes", std::to_string(v), static_cast<double>(cnt) / static_cast<double>(total),
        ratio(cnt, total) + " trimmed packets keep this many bytes after UDP");
  }

  // Control DSCP (the other classes need the injector's log to tell apart).
  if (!control_dscp.empty()) {
    uint64_t total = 0;
    const auto [v, cnt] = top(control_dscp, &total);
    p.dscp.control = v;
    add("dscp.control", std::to_string(v), static_cast<double>(cnt) / static_cast<double>(total),
        ratio(cnt, total) + " SACK/NACK frames");
  }

  // SRv6.
  if (srv6_frames == 0) {
    add("srv6.outer_traffic_class", "copy", 0, "no SRv6 (IPv6-in-IPv6) frames");
    add("srv6.wev_carriage", "sport_and_flow_label", 0, "no SRv6 (IPv6-in-IPv6) frames");
  } else {
    const uint64_t n = srv6_tc_copy + srv6_tc_zero;
    if (n == 0) {
      add("srv6.outer_traffic_class", "copy", 0, "every inner traffic class is 0");
    } else {
      if (srv6_tc_zero > srv6_tc_copy) p.srv6_outer_tc = wire::Srv6OuterTc::kZero;
      add("srv6.outer_traffic_class", srv6_tc_zero > srv6_tc_copy ? "zero" : "copy",
          static_cast<double>(std::max(srv6_tc_copy, srv6_tc_zero)) / static_cast<double>(n),
          ratio(std::max(srv6_tc_copy, srv6_tc_zero), n) +
              " SRv6 frames with a non-zero inner class");
    }
    const bool none = srv6_wev_zero * 2 > srv6_frames;
    if (none) p.srv6_wev = wire::Srv6WevCarriage::kNone;
    const uint64_t agree = none ? srv6_wev_zero : srv6_frames - srv6_wev_zero;
    add("srv6.wev_carriage", none ? "none" : "sport_and_flow_label",
        static_cast<double>(agree) / static_cast<double>(srv6_frames),
        ratio(agree, srv6_frames) +
            (none ? " SRv6 frames with source port 0 and flow label 0"
                  : " SRv6 frames carry a WEV in the source port or flow label"));
  }
  if (std::string why = wire::validate_wire_params(p); !why.empty()) {
    error = "detect: the inferred parameters are inconsistent: " + why;
    return false;
  }
  return true;
}

std::string VariantGuess::summary() const {
  std::ostringstream o;
  for (const auto& c : confidence) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%.2f", c.confidence);
    o << c.key << " = " << c.value << " (confidence " << buf << ": " << c.evidence << ")\n";
  }
  return o.str();
}

std::string VariantGuess::profile_text() const {
  std::vector<std::pair<std::string, std::string>> comments;
  for (const auto& c : confidence) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%.2f", c.confidence);
    comments.emplace_back(c.key, std::string("confidence ") + buf + ": " + c.evidence);
  }
  return "# Inferred by mrct detect from " + std::to_string(mrc_frames) + " MRC frames of " +
         std::to_string(frames) + ".\n" + wire::format_wire_params(params, comments);
}

}  // namespace mrc::check
