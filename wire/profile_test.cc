// Wire-profile parameters: every open choice parses, prints back, and changes the bytes exactly
// where docs/wire-format.md section 19 says, and a frame crafted under each variant decodes to
// the values it was built with.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "wire/samples.h"
#include "wire/wire.h"

namespace mrc::wire {
namespace {

WireParams parse_ok(const std::string& text) {
  WireParams p;
  std::string err;
  EXPECT_TRUE(parse_wire_params(text, "t.toml", p, err)) << err;
  return p;
}

std::string parse_err(const std::string& text) {
  WireParams p;
  std::string err;
  EXPECT_FALSE(parse_wire_params(text, "t.toml", p, err)) << text;
  return err;
}

// Every parameter away from MRP0 at once.
WireParams all_changed() {
  WireParams p;
  p.name = "all";
  p.udp_ports = {4971, 4791};
  p.ev_stripe = EvStripe::kHighInSport;
  p.ecmp_flow_label = EcmpFlowLabel::kEv;
  p.eeth_op_shift = 2;
  p.eeth_sva_bit = 1;
  p.sva = false;
  p.cc_type = 2;
  p.trim_bytes = 32;
  p.srv6_outer_tc = Srv6OuterTc::kZero;
  p.srv6_wev = Srv6WevCarriage::kNone;
  p.dscp.control = 48;
  p.dscp.trimmed = 13;
  return p;
}

TEST(WireProfileFile, EmptyFileIsMrp0) {
  EXPECT_EQ(parse_ok(""), WireParams{});
  EXPECT_EQ(mrp0().params(), WireParams{});
}

TEST(WireProfileFile, FormatParsesBackForEveryParameter) {
  const WireParams p = all_changed();
  EXPECT_EQ(parse_ok(format_wire_params(p)), p);
  EXPECT_EQ(parse_ok(format_wire_params(WireParams{})), WireParams{});
}

TEST(WireProfileFile, ShippedProfilesLoad) {
  for (const char* f :
       {"wire-mrp0.toml", "wire-4971-high.toml", "wire-mrc-client.toml", "wire-pcap-view.toml"}) {
    WireParams p;
    std::string err;
    EXPECT_TRUE(load_wire_params(std::string(MRC_SOURCE_DIR) + "/scenarios/profiles/" + f, p, err))
        << err;
  }
  WireParams p;
  std::string err;
  ASSERT_TRUE(
      load_wire_params(std::string(MRC_SOURCE_DIR) + "/scenarios/profiles/wire-mrp0.toml", p, err));
  EXPECT_EQ(p, WireParams{});
}

TEST(WireProfileFile, ErrorsNameKeyAndLine) {
  EXPECT_EQ(parse_err("name = \"x\"\n[udp]\nports = [0]\n"),
            "t.toml:3: udp.ports: expected a non-empty array of ports 1..65535");
  EXPECT_EQ(parse_err("[ev]\nstripe = \"middle\"\n"),
            "t.toml:2: ev.stripe: expected \"low_in_sport\" or \"high_in_sport\"");
  EXPECT_EQ(parse_err("[headers]\neeth_op_bits = \"3..2\"\n"),
            "t.toml: headers.eeth_sva_bit: bit 3 overlaps the EETH op bits 3..2");
  EXPECT_EQ(parse_err("[headers]\ncc_type = 16\n"),
            "t.toml:2: headers.cc_type: expected an integer 0..15");
  EXPECT_EQ(parse_err("[trim]\nbytes = 8\n"), "t.toml: trim.bytes: 12..64 bytes after UDP");
  EXPECT_NE(parse_err("[udp]\nport = 4971\n").find("t.toml:2: udp.port: unknown key"),
            std::string::npos);
  EXPECT_NE(parse_err("colour = 1\n").find("t.toml:1: colour: unknown key"), std::string::npos);
  EXPECT_NE(parse_err("[udp\n").find("t.toml:1: not TOML"), std::string::npos);
  EXPECT_EQ(parse_err("[udp]\nports = [4791, 4791]\n"), "t.toml: udp.ports: port 4791 twice");
}

TEST(WireProfileFile, OpenByNameOrPath) {
  std::string err;
  auto p = open_wire_profile("MRP0", err);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->params(), WireParams{});
  EXPECT_FALSE(open_wire_profile("MRP9", err));
  EXPECT_NE(err.find("unknown wire profile 'MRP9'"), std::string::npos);
  EXPECT_FALSE(open_wire_profile("/nonexistent/v.toml", err));
  EXPECT_EQ(err, "/nonexistent/v.toml: cannot open the wire profile");
}

// --- each parameter on the wire -------------------------------------------------------------

// A copy: callers pass the temporary all_samples() returns.
samples::Sample find(const std::vector<samples::Sample>& all, const std::string& name) {
  for (const auto& s : all)
    if (s.name == name) return s;
  ADD_FAILURE() << "no sample " << name;
  return all.front();
}

DecodedFrame decode(const std::vector<std::byte>& b, const WireProfile& prof) {
  DecodedFrame f;
  DecodeOptions o;
  o.verify_icrc = true;
  EXPECT_TRUE(decode_frame(as_bytes(b), f, o, prof)) << f.error.describe();
  return f;
}

TEST(WireVariant, UdpPortSet) {
  WireParams p;
  p.udp_ports = {4971};
  const auto prof = make_profile(p);
  const auto all = samples::all_samples(*prof);
  const samples::Sample s = find(all, "stev/WRITE_ONLY");
  const DecodedFrame f = decode(s.frame, *prof);
  EXPECT_EQ(f.udp.dport, 4971);
  EXPECT_TRUE(f.roce);
  EXPECT_TRUE(f.icrc_ok);
  // MRP0 does not read 4971 as RoCE; a profile with both ports reads both.
  DecodedFrame g;
  decode_frame(as_bytes(s.frame), g, {}, mrp0());
  EXPECT_FALSE(g.roce);
  p.udp_ports = {4791, 4971};
  const auto both = make_profile(p);
  EXPECT_TRUE(decode(s.frame, *both).roce);
  EXPECT_TRUE(decode(find(samples::all_samples(), "stev/WRITE_ONLY").frame, *both).roce);
  EXPECT_EQ(both->roce_port(), 4791);
}

TEST(WireVariant, EvStripe) {
  WireParams p;
  p.ev_stripe = EvStripe::kHighInSport;
  const auto prof = make_profile(p);
  const uint32_t wev = 0x0003a5c1;  // the samples' data WEV
  const DecodedFrame hi =
      decode(find(samples::all_samples(*prof), "stev/WRITE_FIRST").frame, *prof);
  EXPECT_EQ(hi.udp.sport, wev >> 16);
  EXPECT_EQ(hi.ip6.flow_label, wev & 0xFFFF);
  EXPECT_EQ(wev_from_carriage(p, EvFormat::kStev, hi.udp.sport, hi.ip6.flow_label), wev);
  const DecodedFrame lo = decode(find(samples::all_samples(), "stev/WRITE_FIRST").frame, mrp0());
  EXPECT_EQ(lo.udp.sport, wev & 0xFFFF);
  EXPECT_EQ(lo.ip6.flow_label, wev >> 16);
  // SRv6 carries the stripe in both flow labels.
  const DecodedFrame s6 =
      decode(find(samples::all_samples(*prof), "srv6/WRITE_FIRST").frame, *prof);
  EXPECT_EQ(s6.udp.sport, wev >> 16);
  EXPECT_EQ(s6.ip6.flow_label, wev & 0xFFFF);
  EXPECT_EQ(s6.inner_ip6.flow_label, wev & 0xFFFF);
}

TEST(WireVariant, EcmpFlowLabel) {
  WireParams p;
  p.ecmp_flow_label = EcmpFlowLabel::kEv;
  const auto prof = make_profile(p);
  const uint32_t wev = 0x0003a5c1;
  const DecodedFrame f = decode(find(samples::all_samples(*prof), "udp6/WRITE_FIRST").frame, *prof);
  EXPECT_EQ(f.udp.sport, wev & 0xFFFF);
  EXPECT_EQ(f.ip6.flow_label, wev & 0xFFFF);
  EXPECT_EQ(wev_from_carriage(p, EvFormat::kUdp, f.udp.sport, f.ip6.flow_label), wev & 0xFFFF);
  std::string json;
  append_json(json, f, 1, 0, *prof);
  EXPECT_NE(json.find("\"ev_format\":\"udp\""), std::string::npos) << json;
  const DecodedFrame z = decode(find(samples::all_samples(), "udp6/WRITE_FIRST").frame, mrp0());
  EXPECT_EQ(z.ip6.flow_label, 0u);
  // STEV is untouched by the ECMP choice.
  const DecodedFrame st =
      decode(find(samples::all_samples(*prof), "stev/WRITE_FIRST").frame, *prof);
  EXPECT_EQ(st.ip6.flow_label, wev >> 16);
}

TEST(WireVariant, EethOpBitsAndSvaBit) {
  WireParams p;
  p.eeth_op_shift = 2;
  p.eeth_sva_bit = 1;
  const auto prof = make_profile(p);
  const samples::Sample s = find(samples::all_samples(*prof), "stev/ENDPOINT_RESPONSE");
  const DecodedFrame f = decode(s.frame, *prof);
  const auto b1 = static_cast<uint8_t>(s.frame[f.off_bth + kBthBytes + 1]);
  EXPECT_EQ(b1, 0x04 | 0x02);  // op 1 (EV_PROBE) in bits 3..2, SVA in bit 1
  EXPECT_EQ(f.eeth.op, 1);
  EXPECT_TRUE(f.eeth.sva);
  EXPECT_EQ(f.eeth.rsvd_b1, 0);
  const samples::Sample m = find(samples::all_samples(), "stev/ENDPOINT_RESPONSE");
  const DecodedFrame g = decode(m.frame, mrp0());
  EXPECT_EQ(static_cast<uint8_t>(m.frame[g.off_bth + kBthBytes + 1]), 0x10 | 0x08);
  // MRP0 reading the 3..2 frame: op 0, reserved bits set.
  const DecodedFrame x = decode(s.frame, mrp0());
  EXPECT_EQ(x.eeth.op, 0);
  EXPECT_NE(x.eeth.rsvd_b1, 0);
}

TEST(WireVariant, SvaUsed) {
  // Without SVA the endpoint response cannot flag service time: SVA 0, svc_time 0, ts_echo the
  // request's ts16 (0x3333) as it was sent; with it, 13 ticks are added and flagged.
  WireParams p;
  p.sva = false;
  const auto prof = make_profile(p);
  const DecodedFrame f =
      decode(find(samples::all_samples(*prof), "stev/ENDPOINT_RESPONSE").frame, *prof);
  EXPECT_FALSE(f.eeth.sva);
  EXPECT_EQ(f.eeth.svc_time, 0);
  EXPECT_EQ(f.eeth.ts_echo, 0x3333);
  const DecodedFrame m =
      decode(find(samples::all_samples(), "stev/ENDPOINT_RESPONSE").frame, mrp0());
  EXPECT_TRUE(m.eeth.sva);
  EXPECT_EQ(m.eeth.svc_time, 0x0D);
  EXPECT_EQ(m.eeth.ts_echo, 0x3340);
}

TEST(WireVariant, CcType) {
  WireParams p;
  p.cc_type = 2;
  const auto prof = make_profile(p);
  const auto all = samples::all_samples(*prof);
  const samples::Sample sack = find(all, "stev/SACK");
  const DecodedFrame f = decode(sack.frame, *prof);
  EXPECT_EQ(f.seth.cc_type, 2);
  EXPECT_EQ(static_cast<uint8_t>(sack.frame[f.off_bth + kBthBytes + 16]) >> 4, 2);
  EXPECT_EQ(decode(find(all, "stev/NACK").frame, *prof).neth.cc_type, 2);
  EXPECT_EQ(decode(find(samples::all_samples(), "stev/SACK").frame, mrp0()).seth.cc_type, 0);
}

TEST(WireVariant, TrimBytes) {
  WireParams p;
  p.trim_bytes = 32;
  const auto prof = make_profile(p);
  EXPECT_EQ(prof->min_trim_bytes(), 32u);
  for (const char* name : {"stev/WRITE_MIDDLE/trimmed", "udp4/WRITE_MIDDLE/trimmed",
                           "srv6-srh/WRITE_MIDDLE/trimmed"}) {
    const samples::Sample s = find(samples::all_samples(*prof), name);
    DecodedFrame f;
    decode_frame(as_bytes(s.frame), f, {}, *prof);
    EXPECT_TRUE(f.trimmed) << name;
    EXPECT_EQ(f.udp.length, 8 + 32) << name;
    EXPECT_EQ(f.dscp(), prof->dscp().trimmed) << name;
    const samples::Sample m = find(samples::all_samples(), name);
    DecodedFrame g;
    decode_frame(as_bytes(m.frame), g, {}, mrp0());
    EXPECT_EQ(g.udp.length, 8 + 20) << name;
  }
}

TEST(WireVariant, Srv6OuterTrafficClassAndCarriage) {
  WireParams p;
  p.srv6_outer_tc = Srv6OuterTc::kZero;
  p.srv6_wev = Srv6WevCarriage::kNone;
  const auto prof = make_profile(p);
  const DecodedFrame f = decode(find(samples::all_samples(*prof), "srv6/WRITE_FIRST").frame, *prof);
  EXPECT_EQ(f.ip6.dscp, 0);
  EXPECT_EQ(f.ip6.ecn, 0);
  EXPECT_EQ(f.inner_ip6.dscp, prof->dscp().trimmable);
  EXPECT_EQ(f.udp.sport, 0);
  EXPECT_EQ(f.ip6.flow_label, 0u);
  EXPECT_EQ(f.inner_ip6.flow_label, 0u);
  EXPECT_EQ(wev_from_carriage(p, EvFormat::kSrv6, 0x1234, 0x5678), 0u);
  const DecodedFrame m = decode(find(samples::all_samples(), "srv6/WRITE_FIRST").frame, mrp0());
  EXPECT_EQ(m.ip6.dscp, m.inner_ip6.dscp);
  EXPECT_NE(m.udp.sport, 0);
  // STEV and UDP frames keep their carriage under this profile.
  EXPECT_NE(decode(find(samples::all_samples(*prof), "stev/WRITE_FIRST").frame, *prof).udp.sport,
            0);
}

TEST(WireVariant, EveryVariantRoundTripsEverySample) {
  // decode -> encode gives the same bytes under each variant, and every MRC sample decodes with
  // a valid ICRC (or as trimmed).
  std::vector<WireParams> variants(1);
  variants.push_back(all_changed());
  for (const char* f : {"wire-4971-high.toml", "wire-mrc-client.toml", "wire-pcap-view.toml"}) {
    WireParams p;
    std::string err;
    ASSERT_TRUE(load_wire_params(std::string(MRC_SOURCE_DIR) + "/scenarios/profiles/" + f, p, err));
    variants.push_back(p);
  }
  for (const WireParams& p : variants) {
    const auto prof = make_profile(p);
    for (const auto& s : samples::all_samples(*prof)) {
      DecodedFrame f;
      DecodeOptions o;
      o.verify_icrc = true;
      decode_frame(as_bytes(s.frame), f, o, *prof);
      if (!f.roce) continue;
      EXPECT_FALSE(f.error) << p.name << " " << s.name << ": " << f.error.describe();
      EXPECT_TRUE(f.trimmed || f.icrc_ok) << p.name << " " << s.name;
      EncodeOptions eo;
      eo.fix_lengths = false;
      eo.fix_ip_checksum = false;
      eo.fix_icrc = false;
      eo.udp_checksum = UdpChecksumPolicy::kAsIs;
      eo.pad_payload = false;
      EXPECT_EQ(encode_frame(f, eo, *prof), s.frame) << p.name << " " << s.name;
    }
  }
}

}  // namespace
}  // namespace mrc::wire
