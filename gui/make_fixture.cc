// mrct-view-fixture: writes a simulated MRC run (captures, event logs, decision log) with a link
// flap and trims, for the viewer's tests, screenshots and benchmark. See gui/fixture.h.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "gui/fixture.h"

int main(int argc, char** argv) {
  mrc::view::fixture::FixtureConfig cfg;
  CLI::App app{"mrct-view-fixture: a simulated MRC run with a link flap and trims"};
  app.add_option("-o,--out", cfg.out_dir, "Output directory")->required();
  app.add_option("--seed", cfg.seed, "Simulator and endpoint seed");
  app.add_option("--messages", cfg.messages, "WRITE messages from a to b");
  app.add_option("--message-bytes", cfg.message_bytes, "Bytes per message");
  app.add_option("--mtu", cfg.path_mtu, "Path MTU (payload bytes per packet)");
  app.add_option("--rate-bps", cfg.link_rate_bps, "Link rate");
  app.add_option("--planes", cfg.planes, "Planes");
  app.add_option("--paths", cfg.paths, "Spine paths per plane");
  app.add_option("--flap-from-ns", cfg.flap_from_ns, "Flap start");
  app.add_option("--flap-until-ns", cfg.flap_until_ns, "Flap end");
  app.add_option("--trim-p", cfg.trim_probability, "Trim probability on the trimming path");
  app.add_option("--sack-gap-threshold", cfg.sack_gap_threshold,
                 "Requester: SACKed PSNs above a hole before it counts as lost");
  app.add_option("--probe-interval-ns", cfg.probe_interval_ns,
                 "Requester: probe period of a retired EV");
  bool no_flap = false, no_events = false;
  app.add_flag("--no-flap", no_flap, "No link flap");
  app.add_flag("--no-events", no_events, "Do not write the event logs");
  app.add_flag("--pcapng", cfg.pcapng, "Write pcapng instead of pcap");
  CLI11_PARSE(app, argc, argv);
  cfg.flap = !no_flap;
  cfg.event_logs = !no_events;
  const auto r = mrc::view::fixture::make_fixture(cfg);
  if (!r.ok) {
    std::fprintf(stderr, "mrct-view-fixture: %s\n", r.error.c_str());
    return 1;
  }
  std::printf(
      "%s: %llu frames, %s: %llu frames, %llu data packets sent, %llu retransmits, "
      "%llu trims, %llu link-down drops, %llu writes completed at %.3f ms\n",
      r.requester_capture.c_str(), static_cast<unsigned long long>(r.requester_frames),
      r.responder_capture.c_str(), static_cast<unsigned long long>(r.responder_frames),
      static_cast<unsigned long long>(r.data_packets_sent),
      static_cast<unsigned long long>(r.retransmits), static_cast<unsigned long long>(r.trims),
      static_cast<unsigned long long>(r.drops_link_down),
      static_cast<unsigned long long>(r.completions), r.end_ns / 1e6);
  return 0;
}
