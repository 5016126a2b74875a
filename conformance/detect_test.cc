// mrct detect: each variant's crafted capture (every packet type in every carriage) and a
// reference conversation under a variant profile are recognised parameter by parameter.
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "conformance/check.h"
#include "wire/samples.h"

namespace mrc::check {
namespace {

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "/mrc_detect_" + std::to_string(::getpid()) + "_" + name;
}

std::string write_samples(const wire::WireProfile& prof, const std::string& name) {
  const std::string path = temp_path(name + ".pcap");
  wire::CaptureWriter w;
  EXPECT_TRUE(w.open(path, wire::CaptureFormat::kPcap)) << w.error();
  uint64_t ts = 1'000'000'000;
  for (const auto& s : wire::samples::all_samples(prof)) {
    EXPECT_TRUE(w.write(ts, wire::as_bytes(s.frame)));
    ts += 1000;
  }
  EXPECT_TRUE(w.close()) << w.error();
  return path;
}

wire::WireParams load(const std::string& file) {
  wire::WireParams p;
  std::string err;
  EXPECT_TRUE(
      wire::load_wire_params(std::string(MRC_SOURCE_DIR) + "/scenarios/profiles/" + file, p, err))
      << err;
  return p;
}

// Every parameter a sample capture carries evidence for, compared one by one.
void expect_detected(const wire::WireParams& want, const VariantGuess& g) {
  const wire::WireParams& got = g.params;
  EXPECT_EQ(got.udp_ports, want.udp_ports) << g.summary();
  EXPECT_EQ(got.ev_stripe, want.ev_stripe) << g.summary();
  EXPECT_EQ(got.ecmp_flow_label, want.ecmp_flow_label) << g.summary();
  EXPECT_EQ(got.eeth_op_shift, want.eeth_op_shift) << g.summary();
  EXPECT_EQ(got.eeth_sva_bit, want.eeth_sva_bit) << g.summary();
  EXPECT_EQ(got.cc_type, want.cc_type) << g.summary();
  EXPECT_EQ(got.trim_bytes, want.trim_bytes) << g.summary();
  EXPECT_EQ(got.srv6_outer_tc, want.srv6_outer_tc) << g.summary();
  EXPECT_EQ(got.srv6_wev, want.srv6_wev) << g.summary();
  EXPECT_EQ(got.dscp.control, want.dscp.control) << g.summary();
  for (const auto& c : g.confidence) {
    if (c.key == "headers.sva") continue;  // the samples' SACK/NACK never set it
    // The port's confidence is the share of RoCE datagrams to it that are MRC: the sample set
    // also holds plain RC frames (IBTA opcodes) on the same port, 16 of 108.
    EXPECT_GT(c.confidence, c.key == "udp.ports" ? 0.8 : 0.9) << c.key << ": " << c.evidence;
  }
}

class DetectVariant : public ::testing::TestWithParam<const char*> {};

TEST_P(DetectVariant, CraftedCaptureOfEachVariant) {
  wire::WireParams want = std::string(GetParam()) == "MRP0" ? wire::WireParams{} : load(GetParam());
  if (want.udp_ports.size() > 1) want.udp_ports.resize(1);  // only the first port is sent to
  const auto prof = wire::make_profile(want);
  const std::string cap = write_samples(*prof, GetParam());
  VariantGuess g;
  std::string err;
  ASSERT_TRUE(detect_variant({cap}, g, err)) << err;
  EXPECT_GT(g.mrc_frames, 50u);
  expect_detected(want, g);
  // The printed profile reads back to the detected parameters.
  wire::WireParams back;
  ASSERT_TRUE(wire::parse_wire_params(g.profile_text(), "detected", back, err)) << err;
  EXPECT_EQ(back, g.params);
  std::filesystem::remove(cap);
}

INSTANTIATE_TEST_SUITE_P(Shipped, DetectVariant,
                         ::testing::Values("MRP0", "wire-4971-high.toml", "wire-mrc-client.toml",
                                           "wire-pcap-view.toml"));

TEST(DetectVariantAll, EveryParameterChangedAtOnce) {
  wire::WireParams want;
  want.udp_ports = {5000};
  want.ev_stripe = wire::EvStripe::kHighInSport;
  want.ecmp_flow_label = wire::EcmpFlowLabel::kEv;
  want.eeth_op_shift = 2;
  want.eeth_sva_bit = 6;
  want.cc_type = 5;
  want.trim_bytes = 36;
  want.srv6_outer_tc = wire::Srv6OuterTc::kZero;
  want.srv6_wev = wire::Srv6WevCarriage::kNone;
  want.dscp.control = 40;
  const auto prof = wire::make_profile(want);
  const std::string cap = write_samples(*prof, "all");
  VariantGuess g;
  std::string err;
  ASSERT_TRUE(detect_variant({cap}, g, err)) << err;
  expect_detected(want, g);
  std::filesystem::remove(cap);
}

TEST(DetectVariantAll, NothingMrcIsNothingToInferFrom) {
  const std::string path = temp_path("none.pcap");
  wire::CaptureWriter w;
  ASSERT_TRUE(w.open(path, wire::CaptureFormat::kPcap));
  for (const auto& s : wire::samples::all_samples())
    if (s.name == "arp" || s.name == "udp6/not-roce") {
      ASSERT_TRUE(w.write(1, wire::as_bytes(s.frame)));
    }
  ASSERT_TRUE(w.close());
  VariantGuess g;
  std::string err;
  ASSERT_TRUE(detect_variant({path}, g, err)) << err;
  EXPECT_EQ(g.mrc_frames, 0u);
  EXPECT_EQ(g.params.udp_ports, std::vector<uint16_t>{4791});
  for (const auto& c : g.confidence) EXPECT_EQ(c.confidence, 0) << c.key;
  EXPECT_FALSE(detect_variant({temp_path("missing.pcap")}, g, err));
  EXPECT_NE(err.find("missing.pcap"), std::string::npos) << err;
  std::filesystem::remove(path);
}

// The checker decodes with the given wire profile: a 4971 capture has no MRC frames to MRP0
// and is judged with the variant profile.
TEST(DetectVariantAll, CheckUsesTheProfileVariant) {
  const wire::WireParams v = load("wire-4971-high.toml");
  const auto prof = wire::make_profile(v);
  const std::string cap = write_samples(*prof, "check");
  CheckOptions o;
  o.captures.push_back({cap, "", 0});
  Report mrp0_report, variant_report, auto_report;
  std::string err;
  ASSERT_TRUE(check_files(o, mrp0_report, err)) << err;
  o.wire_profile = std::string(MRC_SOURCE_DIR) + "/scenarios/profiles/wire-4971-high.toml";
  ASSERT_TRUE(check_files(o, variant_report, err)) << err;
  o.wire_profile = "auto";
  ASSERT_TRUE(check_files(o, auto_report, err)) << err;
  EXPECT_EQ(mrp0_report.captures[0].roce_frames, 0u);
  EXPECT_GT(variant_report.captures[0].roce_frames, 50u);
  EXPECT_EQ(auto_report.captures[0].roce_frames, variant_report.captures[0].roce_frames);
  EXPECT_EQ(variant_report.wire_profile, "MRP0-4971-high");
  EXPECT_EQ(auto_report.wire_profile_origin.rfind("detected by mrct detect", 0), 0u)
      << auto_report.wire_profile_origin;
  bool noted = false;
  for (const auto& n : auto_report.notes)
    noted |= n.find("ev.stripe = high_in_sport") != std::string::npos;
  EXPECT_TRUE(noted);
  o.wire_profile = "/nonexistent.toml";
  EXPECT_FALSE(check_files(o, auto_report, err));
  EXPECT_NE(err.find("/nonexistent.toml"), std::string::npos);
  std::filesystem::remove(cap);
}

}  // namespace
}  // namespace mrc::check
