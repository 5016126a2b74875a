#!/usr/bin/python3
"""The lab's analysis and interop tooling, without a VM (ctest lab_tools).

The simulator's go-back-N RC model writes a lossy RC capture whose truth is known from the
model's own counters; the lab's capture analysis (labreport.analyze_rc) must recover the same
retransmission, go-back and NAK counts and the same message completion times, and the interop
checker must pass on it (mrct decode, ICRC, flipped bytes, tshark). A clean capture must show no
retransmission at all. The same for MRC: the reference engine on the simulator writes a small
MRP0 capture (60 x 64 KiB over 16 EVs, clean and with 3 % loss) and labreport.analyze_mrc, which
reads it through `mrct decode --json`, must recover the engine's retransmissions, SACKs and
reliability probes and its completion times; a lab output directory holding that capture as an
mrc-perf run must come out of labreport.collect analysed, and side_by_side must put the capture's
figures, not mrc-perf's, in the MRC row. Exit 0 pass, 1 fail, 77 skipped (tools missing).
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import interop_check  # noqa: E402
import labreport  # noqa: E402
import side_by_side  # noqa: E402

# node_gid(0) of the simulator harness: fd00::101
REQUESTER = {"fd000000000000000000000000000101"}

PERFTEST_BW = """
 #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]
 65536      1000           0.145800            0.099045            0.000189
---------------------------------------------------------------------------------------
"""
PERFTEST_LAT_CYCLES = """
 #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] 
 2       1000          79456.00        93484248.00      82914.00  	       2020616.89     	-nan   		41999061.00 		93484248.00
"""


def check_mrc(a, tmp, expect):
    """analyze_mrc against the reference engine's own counters and completion times."""
    runs = {}
    for fault in ("none", "loss"):
        pcap = os.path.join(tmp, f"mrc-{fault}.pcap")
        r = subprocess.run([a.sbs, "--transport", "mrc", "--fault", fault, "--messages", "60",
                            "--loss-pct", "3", "--seed", "7", "--pcap", pcap],
                           capture_output=True, text=True)
        expect(r.returncode == 0, f"mrc_lab_sbs mrc {fault} ran (exit {r.returncode}) "
                                  f"{r.stderr[-200:]}")
        if r.returncode != 0:
            return
        runs[fault] = (json.loads(r.stdout), pcap)
    for fault, (truth, pcap) in runs.items():
        c = truth["counters"]
        got = labreport.analyze_mrc(pcap, REQUESTER, a.mrct)
        expect(got["decode_errors"] == 0 and got["completed"] == 60 == got["messages"],
               f"MRC {fault}: 60/60 messages complete in the capture, no decode error "
               f"({got['completed']}/{got['messages']}, {got['decode_errors']})")
        expect(got["data_tx"] == c["data_packets_sent"] + c["retransmits"],
               f"MRC {fault}: data packets on the wire {got['data_tx']} == engine "
               f"{c['data_packets_sent']} + {c['retransmits']} retransmitted")
        expect(got["retransmitted"] == c["retransmits"],
               f"MRC {fault}: retransmitted packets: capture {got['retransmitted']} == engine "
               f"{c['retransmits']}")
        expect(got["sacks_rx"] == c["sacks_rx"] and got["nacks_rx"] == c["nacks_rx"],
               f"MRC {fault}: SACKs {got['sacks_rx']} == {c['sacks_rx']}, NACKs "
               f"{got['nacks_rx']} == {c['nacks_rx']}")
        expect(got["reliability_probes_tx"] == c["probes_sent"],
               f"MRC {fault}: reliability probes {got['reliability_probes_tx']} == engine "
               f"{c['probes_sent']}")
        lat = [(t - s) / 1e3 for s, t in zip(truth["first_tx_ns"], truth["completion_ns"])]
        for q in (50, 99):
            want = labreport.percentile(lat, q)
            have = got["latency_us"]["p50" if q == 50 else "p99"]
            # the model polls completions in 10 us slices after the ACK's arrival
            expect(0 <= want - have <= 20.0,
                   f"MRC {fault}: p{q} latency: capture {have} us, engine {want} us")
    expect(runs["loss"][0]["counters"]["retransmits"] > 0,
           f"the lossy MRC run retransmitted ({runs['loss'][0]['counters']['retransmits']})")

    # the same capture as a lab run: collect() analyses it, side_by_side uses the capture
    lab = os.path.join(tmp, "lab")
    os.makedirs(lab)
    truth, pcap = runs["loss"]
    shutil.copy(pcap, os.path.join(lab, "mrc-write_bw-loss3.pcap"))
    with open(os.path.join(lab, "setup.json"), "w") as fh:
        json.dump({"requester": {"v4": "10.211.0.1", "v6": "fd00::101"}}, fh)
    meta = {"name": "mrc-write_bw-loss3", "tool": "mrc-perf", "family": "v6", "fault": "loss:3",
            "args": "--test write_bw --size 65536 --iters 60 --tx-depth 128", "client_rc": 0,
            "server_rc": 0, "t_start_us": 0, "t_end_us": 1000000, "captured": 1947,
            "capture_dropped": 0, "counters_before": {}, "counters_after": {}}
    with open(os.path.join(lab, "mrc-write_bw-loss3.meta.json"), "w") as fh:
        json.dump(meta, fh)
    with open(os.path.join(lab, "mrc-write_bw-loss3.client.json"), "w") as fh:
        fh.write(json.dumps({"gbit_per_s": 9.99, "messages": 60, "ok": True,
                             "latency_us": {"p50": 777000.0, "p99": 888000.0,
                                            "p999": 999000.0}}) + "\n")
    res = labreport.collect(lab, mrct=a.mrct)
    run = res["runs"][0]
    an = run.get("analysis", {})
    expect(an.get("retransmitted") == truth["counters"]["retransmits"]
           and an.get("decoder") == "mrct decode --json",
           f"collect(): the mrc-perf run's capture analysed as MRC ({an.get('retransmitted')}, "
           f"{an.get('error', '')})")
    row = side_by_side.mrc_perf_row(run)
    expect(row is not None and row["source"] == "capture"
           and row["p99_ms"]["mean"] == an["latency_us"]["p99"] / 1e3
           and row["goodput_gbps"]["mean"] == an["goodput_gbps"]
           and row["retransmits"]["mean"] == an["retransmitted"],
           "side_by_side: the MRC row's goodput, p99 and retransmissions are the capture's, "
           "not mrc-perf's")
    os.remove(os.path.join(lab, "mrc-write_bw-loss3.pcap"))
    run = labreport.collect(lab, mrct=a.mrct)["runs"][0]
    row = side_by_side.mrc_perf_row(run)
    expect(run["capture"] is None and row["source"].startswith("mrc-perf")
           and row.get("p99_ms") is None and row["goodput_gbps"]["mean"] == 9.99,
           "side_by_side: an MRC run without a capture keeps mrc-perf's goodput and no latency "
           "in the wire columns")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mrct", required=True)
    ap.add_argument("--sbs", required=True)
    a = ap.parse_args()
    for p in (a.mrct, a.sbs):
        if not os.path.isfile(p):
            print(f"SKIPPED: {p} not built")
            return 77
    fails = []

    def expect(cond, what):
        print(("ok   " if cond else "FAIL ") + what)
        if not cond:
            fails.append(what)

    bw = labreport.parse_perftest(PERFTEST_BW)
    expect(bw.get("bw_average_gb_per_sec") == 0.099045 and bw.get("iterations") == 1000,
           f"perftest bandwidth table parsed: {bw}")
    # perftest -C prints cycles under [usec] labels
    lat = labreport.parse_perftest(PERFTEST_LAT_CYCLES, cpu_mhz=2594.373, cycles=True)
    expect(abs(lat.get("t_typical_usec", 0) - 82914 / 2594.373) < 0.01
           and lat.get("t_typical_cycles") == 82914.0,
           f"perftest latency in cycles converted with the guest MHz: {lat.get('t_typical_usec')} us")

    # stalls when completions come in batches (a cumulative ACK completing three messages at
    # once, as MRC's transport ACKs do under load): one completion instant every 1 ms and one
    # 51 ms gap. Counting the zero gaps inside a batch made the median 0 and every gap a stall.
    first = [0] * 45
    comp = [1_000_000 * (1 + i // 3) for i in range(45)]
    comp[30:] = [c + 50_000_000 for c in comp[30:]]
    st = labreport.timeline_stats(first, comp, comp, 45 * 4096)
    pr = st.get("progress", {})
    expect(pr.get("stalls") == 1 and pr.get("events") == 15
           and abs(pr.get("stall_time_ms", 0) - 51) < 1e-6,
           f"batched completions: one 51 ms stall in 15 progress instants ({pr})")

    with tempfile.TemporaryDirectory() as tmp:
        runs = {}
        for fault in ("none", "loss"):
            pcap = os.path.join(tmp, f"rc-{fault}.pcap")
            r = subprocess.run([a.sbs, "--transport", "rc", "--fault", fault, "--messages", "60",
                                "--loss-pct", "3", "--rc-timeout-ns", "5000000", "--seed", "7",
                                "--pcap", pcap], capture_output=True, text=True)
            expect(r.returncode == 0, f"mrc_lab_sbs rc {fault} ran (exit {r.returncode}) {r.stderr[-200:]}")
            if r.returncode != 0:
                return 1
            runs[fault] = (json.loads(r.stdout), pcap)

        truth, pcap = runs["none"]
        got = labreport.analyze_rc(pcap, REQUESTER)
        expect(got["retransmitted"] == 0 and got["go_back_events"] == 0 and got["completed"] == 60,
               f"clean capture: no retransmission, 60/60 complete ({got['retransmitted']}, "
               f"{got['go_back_events']}, {got['completed']})")

        truth, pcap = runs["loss"]
        c = truth["counters"]
        got = labreport.analyze_rc(pcap, REQUESTER)
        expect(c["retransmits"] > 0, f"the lossy run retransmitted ({c['retransmits']} packets)")
        expect(got["retransmitted"] == c["retransmits"],
               f"retransmitted packets: capture {got['retransmitted']} == model {c['retransmits']}")
        expect(got["go_back_events"] == c["go_backs"],
               f"go-back events: capture {got['go_back_events']} == model {c['go_backs']}")
        expect(got["go_back_timeout"] == c["timeouts"],
               f"timeout go-backs: capture {got['go_back_timeout']} == model {c['timeouts']}")
        expect(got["naks_rx"] == c["naks_rx"], f"NAKs: capture {got['naks_rx']} == model {c['naks_rx']}")
        expect(got["completed"] == 60, f"60 messages completed in the capture ({got['completed']})")
        # per-message latency from the capture vs the model's completions (10 us polling slices)
        lat_model = [(t - s) / 1e3 for s, t in zip(truth["first_tx_ns"], truth["completion_ns"])]
        p50_model = statistics.median(lat_model)
        expect(abs(got["latency_us"]["p50"] - p50_model) <= 20.0,
               f"median message latency: capture {got['latency_us']['p50']} us, model {p50_model} us")

        rep = interop_check.check([pcap], a.mrct, tshark=shutil.which("tshark"), min_roce=100)
        for line in interop_check.summary_lines(rep):
            print("     " + line)
        expect(rep["ok"], f"interop check on the simulated RC capture: {rep['problems']}")
        t = rep["totals"]
        expect(t["icrc_ok"] == t["roce"] and t["flips_detected"] == t["flips"] >= 2,
               "ICRC 100 % and every flipped byte detected")
        check_mrc(a, tmp, expect)
    print("PASS" if not fails else f"{len(fails)} FAILED")
    return 0 if not fails else 1


if __name__ == "__main__":
    sys.exit(main())
