// The index behind the viewer: what it finds in a capture built frame by frame (every count
// known by construction), and in a simulated run held against the engine's and the simulator's
// own counters.
#include <QTemporaryDir>
#include <QtTest>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "gui/test_capture.h"
#include "gui/view_model.h"
#ifdef MRC_VIEW_HAVE_FIXTURE
#include "gui/fixture.h"
#endif

using namespace mrc::view;
using namespace mrc::view::testing;

namespace {

uint64_t kind_count(const Flow& f, MarkKind k) {
  return f.counts[static_cast<size_t>(k)];
}
uint64_t kind_count(const Lane& l, MarkKind k) {
  return l.counts[static_cast<size_t>(k)];
}

const Lane& lane_of(const Flow& f, uint32_t wev) {
  const uint32_t l = f.lane_of(wev);
  if (l == kNone) throw std::runtime_error("no lane for EV");
  return f.lanes[l];
}

const Flow& main_flow_of(const ViewModel& m) {
  return m.flows()[m.busiest_flow()];
}

bool contains(const std::string& hay, const std::string& needle) {
  return hay.find(needle) != std::string::npos;
}

}  // namespace

class ViewModelTest : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir tmp_;
  SyntheticRun run_;
  ViewModel model_;  // the synthetic run with every artifact

  const Flow& main_flow() const { return model_.flows()[model_.busiest_flow()]; }

 private slots:
  void initTestCase() {
    QVERIFY(tmp_.isValid());
    run_ = write_synthetic_run(tmp_.filePath("run").toStdString());
    LoadOptions o;
    o.capture = run_.capture;
    std::string err;
    QVERIFY2(model_.load(o, err), err.c_str());
  }

  void detects_the_runs_artifacts_next_to_the_capture() {
    QCOMPARE(model_.options().event_logs, std::vector<std::string>{run_.events});
    QCOMPARE(model_.options().decision_logs, std::vector<std::string>{run_.decisions});
    QCOMPARE(model_.options().report, run_.report);
  }

  void frames_and_flows() {
    QCOMPARE(model_.frames().size(), size_t{21});
    QCOMPARE(model_.stats().roce_frames, uint64_t{20});
    QCOMPARE(model_.flows().size(), size_t{2});
    const Flow& f = main_flow();
    QCOMPARE(f.responder_qpn, kResponderQpn);
    QVERIFY(f.requester_qpn.has_value());
    QCOMPARE(*f.requester_qpn, kRequesterQpn);
    QCOMPARE(f.requester_node, std::string("a"));
    QCOMPARE(f.frames.size(), size_t{19});  // 14 of the QP, 5 endpoint operations
    QCOMPARE(f.label(), std::string("fd00::1 -> fd00::2 QP 0x11 (a)"));
    // Outside every flow: plain UDP. The endpoint request between the flow's hosts is in it.
    QCOMPARE(model_.frames()[run_.frame["udp_other"]].flow, kNone);
    QCOMPARE(model_.frames()[run_.frame["udp_other"]].flags & kFlagRoce, 0);
    QCOMPARE(model_.frames()[run_.frame["ep_request"]].flow, model_.busiest_flow());
    QCOMPARE(model_.find_flow("0x33"), model_.frames()[run_.frame["other_flow"]].flow);
    QCOMPARE(model_.find_flow("0x22"), model_.busiest_flow());
    QCOMPARE(model_.find_flow("#1"), 1u);
    QCOMPARE(model_.find_flow("#7"), kNone);
    QCOMPARE(model_.find_flow("0x99"), kNone);
  }

  void one_lane_per_ev_grouped_by_plane() {
    const Flow& f = main_flow();
    QCOMPARE(f.lanes.size(), size_t{6});
    QCOMPARE(f.lanes[0].wev, kEvA);
    QCOMPARE(f.lanes[1].wev, kEvB);
    QVERIFY(f.lanes[2].endpoint);  // after the plane's EVs
    QCOMPARE(f.lanes[3].wev, kEvC);
    QVERIFY(f.lanes[4].endpoint);
    QVERIFY(f.lanes[5].control);
    QCOMPARE(int(f.lanes[0].plane), 1);
    QCOMPARE(int(f.lanes[1].plane), 1);
    QCOMPARE(int(f.lanes[2].plane), 1);
    QCOMPARE(int(f.lanes[3].plane), 2);
    QCOMPARE(int(f.lanes[4].plane), 2);
    QCOMPARE(f.lanes[1].plane_source, std::string("event log"));
    QCOMPARE(f.planes, (std::vector<uint8_t>{1, 2}));
    QCOMPARE(lane_of(f, kEvA).frames.size(), size_t{4});
    QCOMPARE(lane_of(f, kEvB).frames.size(), size_t{4});
    QCOMPARE(lane_of(f, kEvC).frames.size(), size_t{5});
    QCOMPARE(f.lanes[5].frames.size(), size_t{1});
    // Lane lists are in time order.
    for (const Lane& l : f.lanes)
      for (size_t i = 1; i < l.frames.size(); ++i)
        QVERIFY(model_.frames()[l.frames[i - 1]].ts_ns <= model_.frames()[l.frames[i]].ts_ns);
  }

  void marks_per_kind() {
    const Flow& f = main_flow();
    QCOMPARE(kind_count(f, MarkKind::kFirstTx), uint64_t{5});
    QCOMPARE(kind_count(f, MarkKind::kRetransmit), uint64_t{2});
    QCOMPARE(kind_count(f, MarkKind::kTrimmed), uint64_t{1});  // the captured one; the
                                                               // decision log's trim is a note
    QCOMPARE(kind_count(f, MarkKind::kSack), uint64_t{3});
    QCOMPARE(kind_count(f, MarkKind::kNack), uint64_t{1});
    QCOMPARE(kind_count(f, MarkKind::kProbe), uint64_t{1});
    QCOMPARE(kind_count(f, MarkKind::kAck), uint64_t{1});
    QCOMPARE(kind_count(f, MarkKind::kInjectorDrop), uint64_t{2});
    QCOMPARE(kind_count(f, MarkKind::kEvState), uint64_t{2});
    const auto& fr = model_.frames();
    QCOMPARE(fr[run_.frame["r5"]].kind, MarkKind::kRetransmit);
    QVERIFY(fr[run_.frame["r5"]].flags & kFlagRtxBit);
    QCOMPARE(fr[run_.frame["r4"]].kind, MarkKind::kRetransmit);  // PSN seen before, RTX=0
    QVERIFY(!(fr[run_.frame["r4"]].flags & kFlagRtxBit));
    QCOMPARE(fr[run_.frame["nack"]].code, uint8_t{0x01});
    QCOMPARE(fr[run_.frame["nack"]].wev, kEvC);
    QVERIFY(fr[run_.frame["sack_probe"]].flags & kFlagProbeReply);
    QCOMPARE(kind_count(lane_of(f, kEvB), MarkKind::kInjectorDrop), uint64_t{1});
    QCOMPARE(kind_count(f.lanes[f.control_lane()], MarkKind::kInjectorDrop), uint64_t{1});
    QCOMPARE(kind_count(lane_of(f, kEvB), MarkKind::kEvState), uint64_t{2});
  }

  void psns_unwrap_across_the_24_bit_wrap() {
    const auto& fr = model_.frames();
    const Flow& f = main_flow();
    QCOMPARE(f.first_psn, kFirstPsn);
    QCOMPARE(fr[run_.frame["d0"]].rel_psn, 0);
    QCOMPARE(fr[run_.frame["d3"]].psn, 0u);  // wrapped
    QCOMPARE(fr[run_.frame["d3"]].rel_psn, 3);
    QCOMPARE(fr[run_.frame["r4"]].rel_psn, 4);
    QCOMPARE(fr[run_.frame["sack2"]].rel_psn, 5);  // cack
    QCOMPARE(f.min_rel_psn, 0);
    QCOMPARE(f.max_rel_psn, 5);
    QCOMPARE(f.sacks.size(), size_t{3});
    QCOMPARE(f.sacks.back().rel_cack, 5);
    QCOMPARE(f.sacks.back().rel_base, 7);  // cack + sack_offset 2
  }

  void event_log_gives_states_series_and_causes() {
    const Flow& f = main_flow();
    const Lane& b = lane_of(f, kEvB);
    QCOMPARE(b.states.size(), size_t{3});
    QCOMPARE(b.states[0].state, EvState::kGood);
    QCOMPARE(b.states[1].state, EvState::kAssumedBad);
    QCOMPARE(b.states[1].from_ns, run_.t_ns["d4"] + 600);  // 5.6 us
    QCOMPARE(b.states[2].state, EvState::kGood);
    QCOMPARE(b.states[2].until_ns, UINT64_MAX);
    QVERIFY(lane_of(f, kEvA).states.empty());
    QCOMPARE(f.cwnd.size(), size_t{2});
    QCOMPARE(f.cwnd[1].value, 20000.0);
    QCOMPARE(f.bytes_in_flight[0].value, 6144.0);
    QCOMPARE(f.qp_events.size(), size_t{1});
    QVERIFY(contains(model_.describe(run_.frame["r5"]), "engine: retransmit cause nack"));
    QVERIFY(contains(model_.describe(run_.frame["r4"]), "engine: retransmit cause sack_gap"));
  }

  void decision_log_marks_drops_and_links_trims() {
    const auto& fr = model_.frames();
    QVERIFY(fr[run_.frame["d4"]].flags & kFlagDroppedLater);
    QVERIFY(contains(model_.describe(run_.frame["d4"]), "drop WRITE_MIDDLE link_down on p1.a>s1"));
    // The trim happened before this capture point: the frame is trimmed, the log is a note.
    QVERIFY(contains(model_.describe(run_.frame["d5_trimmed"]), "trim WRITE_MIDDLE trim p=0.5"));
    const Flow& f = main_flow();
    const ExtMark* control_drop = nullptr;
    for (const ExtMark& m : f.ext)
      if (m.kind == MarkKind::kInjectorDrop && m.lane == f.control_lane()) control_drop = &m;
    QVERIFY(control_drop != nullptr);
    QVERIFY(contains(control_drop->text, "SACK"));
    QCOMPARE(model_.stats().decisions, uint64_t{5});  // the garbage line is not one
    // Each bad log line is named with its file and line number.
    const auto& w = model_.warnings();
    QVERIFY(std::any_of(w.begin(), w.end(), [&](const std::string& s) {
      return s == run_.events + ":4: not a JSON object, skipped";
    }));
    QVERIFY(std::any_of(w.begin(), w.end(), [&](const std::string& s) {
      return s == run_.decisions + ":3: not a JSON object, skipped";
    }));
  }

  void goodput_counts_each_psn_once_when_delivered() {
    const Flow& f = main_flow();
    const auto& fr = model_.frames();
    QVERIFY(fr[run_.frame["d0"]].flags & kFlagDelivered);
    QVERIFY(!(fr[run_.frame["d4"]].flags & kFlagDelivered));  // dropped after the capture
    QVERIFY(fr[run_.frame["r4"]].flags & kFlagDelivered);     // so its retransmission counts
    QVERIFY(!(fr[run_.frame["d5_trimmed"]].flags & kFlagDelivered));
    QCOMPARE(f.deliv_cum.back(), uint64_t{6 * kPayload});
    // 6 KiB over a window covering the whole run.
    const double bps = model_.goodput_bps(f, kNone, run_.t_ns["sack2"], 20'000);
    QCOMPARE(bps, 6.0 * kPayload * 8 * 1e9 / 20'000);
    // Per lane: EV A delivered d0, d3, r5.
    QCOMPARE(lane_of(f, kEvA).deliv_cum.back(), uint64_t{3 * kPayload});
  }

  void rtt_samples_pair_acks_with_what_they_answer() {
    const Flow& f = main_flow();
    QCOMPARE(lane_of(f, kEvA).rtt.size(), size_t{1});
    QCOMPARE(lane_of(f, kEvA).rtt[0].rtt_ns, uint64_t{3000});  // sack1 - d3
    QCOMPARE(lane_of(f, kEvB).rtt.size(), size_t{1});
    QCOMPARE(lane_of(f, kEvB).rtt[0].rtt_ns, uint64_t{1000});  // probe reply - probe
    const Lane& c = lane_of(f, kEvC);
    QCOMPARE(c.rtt.size(), size_t{2});
    QCOMPARE(c.rtt[0].rtt_ns, uint64_t{2000});  // NACK - trimmed d5
    QCOMPARE(c.rtt[1].rtt_ns, uint64_t{6000});  // sack2 (trigger = cack - 1) - r4
  }

  void report_violations_resolve_to_frames() {
    const auto& v = model_.violations();
    QCOMPARE(v.size(), size_t{3});  // the passing rule is not listed
    QCOMPARE(v[0].id, std::string("MRC-TEST-001"));
    QCOMPARE(v[0].evidence.size(), size_t{2});
    QCOMPARE(v[0].evidence[0].frame, run_.frame["r4"]);
    QVERIFY(!v[0].evidence[0].by_time);
    QCOMPARE(v[0].evidence[1].frame, run_.frame["nack"]);  // other capture: by time
    QVERIFY(v[0].evidence[1].by_time);
    QCOMPARE(v[1].status, std::string("warn"));
    QCOMPARE(v[1].evidence[0].frame, run_.frame["d4"]);  // 5.5 us: nearest, earlier on a tie
  }

  void selection_statistics() {
    const Flow& f = main_flow();
    Filter all;
    SelectionStats st =
        model_.selection_stats(model_.busiest_flow(), run_.t_ns["d0"], run_.t_ns["d3"], all);
    QCOMPARE(st.frames, uint64_t{4});
    QCOMPARE(st.counts[static_cast<size_t>(MarkKind::kFirstTx)], uint64_t{4});
    QCOMPARE(st.data_bytes, uint64_t{4 * kPayload});
    QCOMPARE(st.delivered_bytes, uint64_t{4 * kPayload});
    QCOMPARE(st.lanes_used, 3u);
    QCOMPARE(st.data_per_plane, (std::vector<std::pair<uint8_t, uint64_t>>{{1, 3}, {2, 1}}));
    Filter plane2;
    plane2.plane = 2;
    st = model_.selection_stats(model_.busiest_flow(), f.first_ns, f.last_ns, plane2);
    QCOMPARE(st.frames, uint64_t{8});  // lane C and plane 2's endpoint operations
    QCOMPARE(st.rtt_samples, uint64_t{2});
    QCOMPARE(st.rtt_min_ns, 2000.0);
    // A kinds filter is a display filter: the statistics still count every frame (issue 18).
    Filter kinds;
    kinds.kinds = kind_bit(MarkKind::kInjectorDrop) | kind_bit(MarkKind::kEvState);
    st = model_.selection_stats(model_.busiest_flow(), f.first_ns, f.last_ns, kinds);
    QCOMPARE(st.frames,
             model_.selection_stats(model_.busiest_flow(), f.first_ns, f.last_ns, all).frames);
    QCOMPARE(st.counts[static_cast<size_t>(MarkKind::kInjectorDrop)], uint64_t{2});
    QCOMPARE(st.counts[static_cast<size_t>(MarkKind::kEvState)], uint64_t{2});
    Filter ev;
    ev.evs = {kEvA};
    QVERIFY(ev.lane_visible(lane_of(f, kEvA)));
    QVERIFY(!ev.lane_visible(lane_of(f, kEvB)));
    QVERIFY(!ev.lane_visible(f.lanes[f.control_lane()]));
  }

  void without_logs_planes_come_from_source_macs() {
    const std::string dir = tmp_.filePath("nologs").toStdString();
    SyntheticRun r = write_synthetic_run(dir, false);
    ViewModel m;
    LoadOptions o;
    o.capture = r.capture;
    std::string err;
    QVERIFY2(m.load(o, err), err.c_str());
    const Flow& f = m.flows()[m.busiest_flow()];
    QCOMPARE(int(lane_of(f, kEvA).plane), 1);
    QCOMPARE(int(lane_of(f, kEvC).plane), 2);
    QCOMPARE(lane_of(f, kEvA).plane_source, std::string("source MAC"));
    QCOMPARE(kind_count(f, MarkKind::kInjectorDrop), uint64_t{0});
    QVERIFY(m.violations().empty());
    QVERIFY(m.frames()[r.frame["d4"]].flags & kFlagDelivered);  // nothing says it was lost
  }

  void a_fault_free_requester_log_still_gives_cwnd() {
    // A clean run's requester logs no EV event: its cwnd samples must still reach its flow
    // (the viewer said "no event log for this QP" on every fault-free run), and a responder's
    // log (nothing in flight) must not be taken for the requester's.
    const std::string dir = tmp_.filePath("cleanlog").toStdString();
    SyntheticRun r = write_synthetic_run(dir, false);
    const std::string log = dir + "/clean.events.jsonl";
    std::ofstream(log) << "{\"t_ns\":1,\"node\":\"a\",\"kind\":\"qp_state\",\"qpn\":34,"
                          "\"from\":\"RTR\",\"to\":\"RTS\",\"reason\":\"modify_qp\"}\n"
                          "{\"t_ns\":2,\"node\":\"a\",\"kind\":\"cwnd\",\"qpn\":34,"
                          "\"cwnd\":40000,\"bytes_in_flight\":6144,\"reason\":\"sample\"}\n"
                          "{\"t_ns\":3,\"node\":\"b\",\"kind\":\"cwnd\",\"qpn\":34,"
                          "\"cwnd\":50000,\"bytes_in_flight\":0,\"reason\":\"sample\"}\n";
    ViewModel m;
    LoadOptions o;
    o.capture = r.capture;
    o.event_logs = {log};
    std::string err;
    QVERIFY2(m.load(o, err), err.c_str());
    const Flow& f = main_flow_of(m);
    QCOMPARE(f.cwnd.size(), size_t{1});
    QCOMPARE(f.cwnd[0].value, 40000.0);
    QCOMPARE(f.requester_node, std::string("a"));
  }

  void artifacts_are_recognised_by_content_not_name() {
    namespace fs = std::filesystem;
    const fs::path dir = tmp_.filePath("odd").toStdString();
    fs::create_directories(dir);
    fs::copy_file(run_.events, dir / "x1.jsonl");
    fs::copy_file(run_.decisions, dir / "x2.jsonl");
    fs::copy_file(run_.report, dir / "verdict.json");
    std::ofstream(dir / "other.json") << "{\"rules\": 3}";
    std::ofstream(dir / "notes.jsonl") << "{\"hello\": 1}\n";
    const Artifacts a = detect_artifacts(dir.string());
    QCOMPARE(a.event_logs, std::vector<std::string>{(dir / "x1.jsonl").string()});
    // x1 starts with a qp_state line, x2 with a drop.
    QCOMPARE(a.decision_logs, std::vector<std::string>{(dir / "x2.jsonl").string()});
    QCOMPARE(a.report, (dir / "verdict.json").string());
  }

  // Issue 18, problem 1: a scenario run keeps its captures in captures/ (and view/), its event
  // logs in endpoints/, its report in check/. Opening the run directory, or a capture inside it,
  // must find them all, and say what it looked for and did not find.
  void a_run_directory_opens_with_every_artifact() {
    namespace fs = std::filesystem;
    const fs::path dir = tmp_.filePath("scenario-run").toStdString();
    for (const char* sub : {"captures", "endpoints", "check"}) fs::create_directories(dir / sub);
    fs::copy_file(run_.capture, dir / "captures" / "h1-h1-p1.pcap");
    fs::copy_file(run_.events, dir / "endpoints" / "h1-client.events.jsonl");
    std::ofstream(dir / "endpoints" / "h1-client.stdout") << "done\n";
    fs::copy_file(run_.decisions, dir / "decisions.jsonl");
    fs::copy_file(run_.report, dir / "check" / "report.json");
    std::ofstream(dir / "check" / "dut-profile.json") << "{\"qps\": []}";
    std::ofstream(dir / "result.json") << "{\"verdict\": \"fail\"}";

    // A capture of the run, opened on its own (the way `mrct view captures/x.pcap` is).
    {
      ViewModel m;
      LoadOptions o;
      o.capture = (dir / "captures" / "h1-h1-p1.pcap").string();
      std::string err;
      QVERIFY2(m.load(o, err), err.c_str());
      QCOMPARE(m.options().report, (dir / "check" / "report.json").string());
      QCOMPARE(m.options().event_logs.size(), size_t{1});
      QCOMPARE(m.violations().size(), size_t{3});
    }
    // The directory, without a manifest: searched; the missing path table is named.
    {
      ViewModel m;
      LoadOptions o;
      o.run_dir = dir.string();
      std::string err;
      QVERIFY2(m.load(o, err), err.c_str());
      QCOMPARE(m.capture_path(), (dir / "captures" / "h1-h1-p1.pcap").string());
      QCOMPARE(m.options().event_logs,
               std::vector<std::string>{(dir / "endpoints" / "h1-client.events.jsonl").string()});
      QCOMPARE(m.options().decision_logs,
               std::vector<std::string>{(dir / "decisions.jsonl").string()});
      QCOMPARE(m.options().report, (dir / "check" / "report.json").string());
      QVERIFY(m.run().manifest.empty());
      QCOMPARE(m.run().missing.size(), size_t{1});
      QVERIFY2(contains(m.run().missing[0], "path table"), m.run().missing[0].c_str());
      QVERIFY(!main_flow_of(m).lanes.empty());
      QCOMPARE(m.violations().size(), size_t{3});
    }
    // With a manifest (what `mrct run` writes): its entries win, absent files are named.
    fs::create_directories(dir / "view");
    fs::copy_file(run_.capture, dir / "view" / "h1.pcap");
    std::ofstream(dir / "paths.json")
        << R"({"schema": "mrctb-paths/1", "pairs": [{"src": "h1", "dst": "h2", "evs": [)"
           R"({"ev": 0, "plane": 1, "port": 2, "t1": 1, "outer_da": "fcbb:0:1100::",)"
           R"( "usids": ["1100", "1201"], "hops": ["p2t0s0", "h2"]}]}]})";
    std::ofstream(dir / "manifest.json")
        << R"({"schema": "mrctb-manifest/1", "view_capture": "view/h1.pcap",)"
           R"( "captures": [{"path": "captures/h1-h1-p1.pcap", "role": "requester"}],)"
           R"( "event_logs": ["endpoints/h1-client.events.jsonl", "endpoints/h2-server.events.jsonl"],)"
           R"( "decision_logs": ["decisions.jsonl"], "report": "check/report.json",)"
           R"( "paths": "paths.json"})";
    {
      ViewModel m;
      LoadOptions o;
      o.run_dir = dir.string();
      std::string err;
      QVERIFY2(m.load(o, err), err.c_str());
      QCOMPARE(m.capture_path(), (dir / "view" / "h1.pcap").string());
      QCOMPARE(m.run().manifest, (dir / "manifest.json").string());
      QCOMPARE(m.run().captures.size(), size_t{2});
      QCOMPARE(m.options().event_logs.size(), size_t{1});
      QCOMPARE(m.run().missing.size(), size_t{1});
      QVERIFY2(contains(m.run().missing[0], "h2-server.events.jsonl"), m.run().missing[0].c_str());
      QCOMPARE(m.paths().size(), size_t{1});
      QCOMPARE(m.paths()[0].plane, uint8_t{2});
      QVERIFY(contains(m.paths()[0].text(), "uSIDs 1100 1201"));
    }
    // A suite: the directory of several runs opens its first run that did not pass.
    {
      const fs::path suite = tmp_.filePath("suite").toStdString();
      fs::create_directories(suite / "a-pass");
      std::ofstream(suite / "a-pass" / "result.json") << "{\"verdict\": \"pass\"}";
      fs::copy(dir, suite / "b-fail", fs::copy_options::recursive);
      RunDir r;
      std::string err;
      QVERIFY2(resolve_run_dir(suite.string(), r, err), err.c_str());
      QCOMPARE(r.dir, (suite / "b-fail").string());
      QCOMPARE(r.runs.size(), size_t{2});
    }
    // Not a run: the error says where it looked.
    {
      RunDir r;
      std::string err;
      QVERIFY(!resolve_run_dir((dir / "check").string(), r, err));
      QVERIFY2(contains(err, "no capture"), err.c_str());
    }
  }

  // Issue 18, problem 2: endpoint operations (EV probes, port status, their responses) have a
  // lane per plane in the flow of the two hosts, both directions.
  void endpoint_operations_get_a_lane_per_plane() {
    const Flow& f = main_flow();
    const auto& fr = model_.frames();
    for (const char* name : {"ep_request", "rev_probe_p1", "rev_probe_p2_a",
                             "rev_probe_p2_a_response", "rev_probe_p2_b"}) {
      const FrameInfo& x = fr[run_.frame.at(name)];
      QVERIFY2(x.flow == model_.busiest_flow(), name);
      QCOMPARE(x.kind, MarkKind::kEndpointOp);
      QVERIFY2(x.lane != kNone && f.lanes[x.lane].endpoint, name);
    }
    QCOMPARE(fr[run_.frame.at("rev_probe_p1")].plane, uint8_t{1});
    QCOMPARE(fr[run_.frame.at("ep_request")].lane, fr[run_.frame.at("rev_probe_p1")].lane);
    const uint32_t p2 = f.endpoint_lane(2);
    QVERIFY(p2 != kNone);
    QCOMPARE(f.lanes[p2].frames.size(), size_t{3});
    QCOMPARE(kind_count(f, MarkKind::kEndpointOp), uint64_t{5});
    QVERIFY((fr[run_.frame.at("rev_probe_p2_a")].flags & kFlagFromResponder) != 0);
    QVERIFY((fr[run_.frame.at("rev_probe_p2_a_response")].flags & kFlagEndpointResponse) != 0);
    // EV lanes are untouched: plane 2 still has one EV.
    uint32_t evs_p2 = 0;
    for (const Lane& l : f.lanes) evs_p2 += !l.control && !l.endpoint && l.plane == 2;
    QCOMPARE(evs_p2, 1u);
    QVERIFY(contains(model_.describe(run_.frame.at("rev_probe_p2_b")),
                     "EV probe request (responder -> requester)"));
  }

  // A violation about an interval on a plane: the interval, the plane's lanes and the EV probes
  // that bound the gap (not one frame).
  void violation_focus_is_the_whole_evidence() {
    const auto& vs = model_.violations();
    const auto it = std::find_if(vs.begin(), vs.end(),
                                 [](const Violation& v) { return v.id == "MRC-TEST-004"; });
    QVERIFY(it != vs.end());
    QCOMPARE(it->evidence[0].plane, uint8_t{2});
    const EvidenceFocus fo = model_.evidence_focus(*it);
    QCOMPARE(fo.flow, model_.busiest_flow());
    QCOMPARE(fo.intervals.size(), size_t{1});
    QCOMPARE(fo.intervals[0].first, run_.t_ns.at("rev_probe_p2_a") - 100);
    const Flow& f = main_flow();
    QVERIFY(std::find(fo.lanes.begin(), fo.lanes.end(), f.endpoint_lane(2)) != fo.lanes.end());
    QVERIFY(std::find(fo.lanes.begin(), fo.lanes.end(), f.lane_of(kEvC)) != fo.lanes.end());
    for (const char* name : {"rev_probe_p2_a", "rev_probe_p2_b"})
      QVERIFY2(
          std::find(fo.frames.begin(), fo.frames.end(), run_.frame.at(name)) != fo.frames.end(),
          name);
    QVERIFY(std::find(fo.frames.begin(), fo.frames.end(),
                      run_.frame.at("rev_probe_p2_a_response")) == fo.frames.end());
  }

  // Issue 18, problem 6: the display filters (kinds, opcode) do not change the statistics;
  // goodput hid with first transmissions was 0 before.
  void statistics_do_not_follow_the_display_filters() {
    const uint32_t fi = model_.busiest_flow();
    const Flow& f = main_flow();
    Filter all;
    Filter no_first = all;
    no_first.kinds = kAllKinds & ~kind_bit(MarkKind::kFirstTx);
    Filter sack_op;
    sack_op.opcode = 0xDC;
    const SelectionStats a = model_.selection_stats(fi, f.first_ns, f.last_ns, all);
    QVERIFY(a.delivered_bytes > 0);
    for (const Filter& flt : {no_first, sack_op}) {
      const SelectionStats b = model_.selection_stats(fi, f.first_ns, f.last_ns, flt);
      QCOMPARE(b.delivered_bytes, a.delivered_bytes);
      QCOMPARE(b.frames, a.frames);
      QCOMPARE(b.counts, a.counts);
    }
    // The lane filter still narrows: EV A alone delivered less.
    Filter only_a;
    only_a.evs = {kEvA};
    QVERIFY(model_.selection_stats(fi, f.first_ns, f.last_ns, only_a).delivered_bytes <
            a.delivered_bytes);
  }

  // Issue 18, problem 5: the per-EV table's figures.
  void ev_stats_per_lane() {
    const uint32_t fi = model_.busiest_flow();
    const auto rows = model_.ev_stats(fi, 0, UINT64_MAX);
    QCOMPARE(rows.size(), size_t{3});
    const auto row = [&](uint32_t wev) {
      for (const EvStats& e : rows)
        if (e.wev == wev) return e;
      return EvStats{};
    };
    QCOMPARE(row(kEvA).packets, uint64_t{3});  // d0, d3, r5
    QCOMPARE(row(kEvA).retransmissions, uint64_t{1});
    QCOMPARE(row(kEvB).packets, uint64_t{2});  // d1, d4
    QCOMPARE(row(kEvB).drops, uint64_t{1});    // d4, by the decision log
    QCOMPARE(row(kEvC).packets, uint64_t{3});  // d2, d5 trimmed, r4
    QCOMPARE(row(kEvC).trims, uint64_t{1});
    QCOMPARE(row(kEvC).retransmissions, uint64_t{1});
    QCOMPARE(row(kEvC).plane, uint8_t{2});
    // EV B was ASSUMED_BAD from 5.6 us to 12.5 us.
    QCOMPARE(row(kEvB).assumed_bad_ns, uint64_t{6900});
    QCOMPARE(row(kEvA).assumed_bad_ns, uint64_t{0});
    // The RTT of sack1 (d3 at 4 us, SACK at 7 us) is EV A's only sample.
    QCOMPARE(row(kEvA).rtt_samples, uint64_t{1});
    QCOMPARE(row(kEvA).rtt_p50_ns, uint64_t{3000});
    QCOMPARE(row(kEvA).rtt_p99_ns, uint64_t{3000});
    for (const EvStats& e : rows) QVERIFY(!e.idle);
    // A range before EV B's change holds none of it.
    QCOMPARE(model_.ev_stats(fi, 0, run_.t_ns["d3"])[1].assumed_bad_ns, uint64_t{0});
  }

  // Issue 18, problem 7: what the packet pane links to.
  void related_frames_link_copies_trims_nacks_and_sacks() {
    const auto roles = [&](const std::string& name) {
      std::map<std::string, uint32_t> out;
      for (const RelatedFrame& r : model_.related(run_.frame[name])) out[r.role] = r.frame;
      return out;
    };
    auto r = roles("r4");
    QCOMPARE(r.at("original"), run_.frame["d4"]);
    r = roles("d4");  // dropped after the capture point: its later copy is its resend
    QCOMPARE(r.at("later copy"), run_.frame["r4"]);
    QCOMPARE(r.at("resend"), run_.frame["r4"]);
    r = roles("d5_trimmed");
    QCOMPARE(r.at("its NACK"), run_.frame["nack"]);
    QCOMPARE(r.at("resend"), run_.frame["r5"]);
    r = roles("nack");
    QCOMPARE(r.at("NACKed packet"), run_.frame["d5_trimmed"]);
    QCOMPARE(r.at("resend"), run_.frame["r5"]);
    r = roles("sack1");
    QCOMPARE(r.at("triggered by"), run_.frame["d3"]);
    r = roles("sack_probe");
    QCOMPARE(r.at("triggered by"), run_.frame["probe"]);
    QVERIFY(model_.related(run_.frame["udp_other"]).empty());
    const std::string cov = model_.sack_coverage(run_.frame["sack1"]);
    QVERIFY2(contains(cov, "cumulative ACK through PSN 0x000000 (rel +3)"), cov.c_str());
    QVERIFY(model_.sack_coverage(run_.frame["d0"]).empty());
    // The packet pane's first lines say what became of a frame.
    const std::string d = model_.describe(run_.frame["d4"]);
    QVERIFY2(d.find("fate: dropped after the capture point") < d.find("flow:"), d.c_str());
    QVERIFY2(d.find("log: drop") < d.find("flow:"), d.c_str());
  }

  // Issue 18, problem 7: next / previous of a kind, and go to frame / time / PSN.
  void navigation_steps_by_kind_and_goes_to_frame_time_psn() {
    const uint32_t fi = model_.busiest_flow();
    const Filter all;
    const auto next = [&](NavKind k, uint64_t t, uint32_t fr, bool fwd = true) {
      const auto n = model_.navigate(fi, k, fwd, t, fr, all);
      return n ? *n : NavTarget{0, kNone - 1, "none"};
    };
    QCOMPARE(next(NavKind::kRetransmit, 0, kNone).frame, run_.frame["r5"]);
    QCOMPARE(next(NavKind::kRetransmit, run_.t_ns["r5"], run_.frame["r5"]).frame, run_.frame["r4"]);
    QCOMPARE(next(NavKind::kRetransmit, run_.t_ns["r4"], run_.frame["r4"]).frame, kNone - 1);
    QCOMPARE(next(NavKind::kRetransmit, run_.t_ns["r4"], run_.frame["r4"], false).frame,
             run_.frame["r5"]);
    QCOMPARE(next(NavKind::kTrim, 0, kNone).frame, run_.frame["d5_trimmed"]);
    QCOMPARE(next(NavKind::kNack, 0, kNone).frame, run_.frame["nack"]);
    QCOMPARE(next(NavKind::kDrop, 0, kNone).frame, run_.frame["d4"]);
    const NavTarget sc = next(NavKind::kStateChange, 0, kNone);
    QCOMPARE(sc.ts_ns - model_.first_ns(), run_.t_ns["d0"] - model_.first_ns() + 4600);
    QVERIFY2(contains(sc.what, "GOOD -> ASSUMED_BAD"), sc.what.c_str());
    QVERIFY(contains(next(NavKind::kStateChange, sc.ts_ns, kNone).what, "ASSUMED_BAD -> GOOD"));
    // Only lanes the filter shows: EV C's retransmission is the first on EV C.
    Filter c;
    c.evs = {kEvC};
    QCOMPARE(model_.navigate(fi, NavKind::kRetransmit, true, 0, kNone, c)->frame, run_.frame["r4"]);

    std::string err;
    QCOMPARE(model_.go_to(fi, "3", err)->frame, 2u);
    QCOMPARE(model_.go_to(fi, "#3", err)->frame, 2u);
    QCOMPARE(model_.go_to(fi, "frame 3", err)->frame, 2u);
    const uint64_t d4_rel = run_.t_ns["d4"] - model_.first_ns();
    QCOMPARE(model_.go_to(fi, "+" + format_time_ns(d4_rel), err)->frame, run_.frame["d4"]);
    QCOMPARE(model_.go_to(fi, "t " + std::to_string(d4_rel) + "ns", err)->frame, run_.frame["d4"]);
    QCOMPARE(model_.go_to(fi, "psn +4", err)->frame, run_.frame["d4"]);
    char abs[32];
    std::snprintf(abs, sizeof abs, "PSN 0x%06x", (kFirstPsn + 4) & 0xFFFFFF);
    QCOMPARE(model_.go_to(fi, abs, err)->frame, run_.frame["d4"]);
    for (const char* bad : {"", "0", "99999", "psn zz", "psn +999", "t 5 parsecs"}) {
      err.clear();
      QVERIFY2(!model_.go_to(fi, bad, err), bad);
      QVERIFY2(!err.empty(), bad);
    }
    QVERIFY(model_.go_to(fi, "99999", err) == std::nullopt);
    QVERIFY2(contains(err, "1..21"), err.c_str());
  }

  void bad_inputs_say_what_is_wrong() {
    namespace fs = std::filesystem;
    ViewModel m;
    std::string err;
    LoadOptions o;
    o.capture = tmp_.filePath("missing.pcap").toStdString();
    QVERIFY(!m.load(o, err));
    QVERIFY2(contains(err, "missing.pcap: cannot open"), err.c_str());

    const fs::path empty = tmp_.filePath("empty.pcap").toStdString();
    std::ofstream(empty).close();
    o.capture = empty.string();
    QVERIFY(!m.load(o, err));
    QVERIFY2(contains(err, "empty file"), err.c_str());

    const fs::path text = tmp_.filePath("text.pcap").toStdString();
    std::ofstream(text) << "this is not a capture file at all";
    o.capture = text.string();
    QVERIFY(!m.load(o, err));
    QVERIFY2(contains(err, text.string() + ": "), err.c_str());

    // A capture cut in the middle of a record keeps the frames before the damage.
    const fs::path cut = tmp_.filePath("cut/run.pcap").toStdString();
    fs::create_directories(cut.parent_path());
    {
      std::ifstream in(run_.capture, std::ios::binary);
      std::string bytes((std::istreambuf_iterator<char>(in)), {});
      bytes.resize(bytes.size() - 100);
      std::ofstream(cut, std::ios::binary) << bytes;
    }
    o.capture = cut.string();
    QVERIFY2(m.load(o, err), err.c_str());
    QCOMPARE(m.frames().size(), size_t{20});
    QVERIFY(!m.warnings().empty());
    QVERIFY2(contains(m.warnings().front(), cut.string() + ": truncated"),
             m.warnings().front().c_str());

    // An explicit report that is not one is an error; a detected one would only be skipped.
    o.capture = run_.capture;
    o.report = text.string();
    QVERIFY(!m.load(o, err));
    QVERIFY2(contains(err, "not valid JSON"), err.c_str());
  }

#ifdef MRC_VIEW_HAVE_FIXTURE
  void simulated_run_matches_engine_and_simulator_counters() {
    fixture::FixtureConfig cfg;
    cfg.out_dir = tmp_.filePath("sim").toStdString();
    const fixture::FixtureResult truth = fixture::make_fixture(cfg);
    QVERIFY2(truth.ok, truth.error.c_str());
    QVERIFY(truth.trims > 0);
    QVERIFY(truth.data_drops_link_down > 0);

    // The requester's capture: every send, every SACK/NACK it received.
    ViewModel m;
    LoadOptions o;
    o.capture = truth.requester_capture;
    std::string err;
    QVERIFY2(m.load(o, err), err.c_str());
    QCOMPARE(m.frames().size(), size_t(truth.requester_frames));
    QCOMPARE(m.stats().decode_errors, uint64_t{0});
    const uint32_t fi = m.find_flow(std::to_string(truth.responder_qpn));
    QVERIFY(fi != kNone);
    const Flow& f = m.flows()[fi];
    QCOMPARE(*f.requester_qpn, truth.requester_qpn);
    QCOMPARE(f.first_psn, truth.initial_psn);
    QCOMPARE(kind_count(f, MarkKind::kFirstTx), truth.data_packets_sent);
    QCOMPARE(kind_count(f, MarkKind::kRetransmit), truth.retransmits);
    QCOMPARE(kind_count(f, MarkKind::kProbe), truth.probes_sent);
    QCOMPARE(kind_count(f, MarkKind::kSack), truth.sacks_rx);
    QCOMPARE(kind_count(f, MarkKind::kNack), truth.nacks_rx);
    QCOMPARE(kind_count(f, MarkKind::kTrimmed), truth.trims);  // from the decision log
    QCOMPARE(kind_count(f, MarkKind::kInjectorDrop), truth.decisions_drop_qp);
    QCOMPARE(kind_count(f, MarkKind::kEvState), truth.ev_state_events);
    // One lane per EV that carried data, on the EV's plane, with the engine's packet count
    // (first transmissions and retransmissions; probes are not counted there).
    std::set<uint32_t> used;
    for (const auto& ev : truth.evs) {
      if (ev.packets_sent == 0) continue;
      used.insert(ev.wev);
      const uint32_t l = f.lane_of(ev.wev);
      QVERIFY(l != kNone);
      QCOMPARE(f.lanes[l].plane, ev.plane);
      QCOMPARE(kind_count(f.lanes[l], MarkKind::kFirstTx) +
                   kind_count(f.lanes[l], MarkKind::kRetransmit),
               ev.packets_sent);
    }
    std::set<uint32_t> lanes;
    for (const Lane& l : f.lanes)
      if (!l.control &&
          kind_count(l, MarkKind::kFirstTx) + kind_count(l, MarkKind::kRetransmit) > 0)
        lanes.insert(l.wev);
    QCOMPARE(lanes, used);
    // The flap: the drops are on the flap plane's EVs.
    for (const ExtMark& e : f.ext)
      if (e.kind == MarkKind::kInjectorDrop && e.lane != f.control_lane())
        QCOMPARE(f.lanes[e.lane].plane, cfg.flap_plane);

    // The responder's capture sees the trimmed packets themselves.
    ViewModel rm;
    o.capture = truth.responder_capture;
    QVERIFY2(rm.load(o, err), err.c_str());
    const Flow& rf = rm.flows()[rm.find_flow(std::to_string(truth.responder_qpn))];
    uint64_t trimmed_frames = 0;
    for (uint32_t i : rf.frames) trimmed_frames += rm.frames()[i].kind == MarkKind::kTrimmed;
    QCOMPARE(trimmed_frames, truth.trimmed_rx);
    QCOMPARE(kind_count(rf, MarkKind::kNack), truth.nacks_sent);
  }
#endif
};

QTEST_GUILESS_MAIN(ViewModelTest)
#include "view_model_test.moc"
