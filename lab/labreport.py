"""Turns a lab output directory (perftest text, meta JSON, captures) into results JSON, and holds
the timing analysis shared with side_by_side.py (stdlib only).

Timing definitions (the same for RC over rxe and for the simulated transports):
  message latency  completion time - first transmission of the message's first packet.
                   RC over rxe: the completion is the arrival, at the requester, of the first ACK
                   (or NAK-sequence-error, which acknowledges the PSNs before it) covering the
                   message's last PSN; for READ, the in-order arrival of its last response.
  goodput          distinct payload bytes / (last completion - first data transmission).
  progress event   a message completes.
  stall            a gap between progress events longer than 10x the run's median gap; stall
                   time is the sum of those gaps, max_gap the longest gap of all.
  go-back          a retransmission of a PSN at or below the highest sent; "nak" when a NAK
                   (PSN sequence error) arrived since the previous go-back, "timeout" otherwise
                   (the ACK timer, or rxe's completer asking for a retry).
  flap recovery    (rxe captures) from the last ACK progress before the link went down to the
                   first one after it came back, and from link up to that first progress.
"""
import glob
import json
import os
import re
import statistics

import labpcap

PSN_MOD = 1 << 24


def percentile(values, q):
    if not values:
        return None
    v = sorted(values)
    k = (len(v) - 1) * q / 100.0
    lo = int(k)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def timeline_stats(first_tx_ns, completion_ns, progress_ns, payload_bytes, stall_factor=10.0):
    """Goodput, message latency percentiles and stalls from per-message times (ns)."""
    done = [(s, c) for s, c in zip(first_tx_ns, completion_ns) if s is not None and c is not None]
    out = {"messages": len(first_tx_ns), "completed": len(done)}
    if not done:
        return out
    start = min(s for s, _ in done)
    end = max(c for _, c in done)
    lat = [(c - s) / 1e3 for s, c in done]
    dur = (end - start) / 1e9
    out.update(duration_s=round(dur, 6),
               goodput_gbps=round(payload_bytes * 8 / dur / 1e9, 4) if dur > 0 else None,
               latency_us={"p50": round(percentile(lat, 50), 1), "p99": round(percentile(lat, 99), 1),
                           "p999": round(percentile(lat, 99.9), 1), "max": round(max(lat), 1)})
    prog = sorted(t for t in progress_ns if start <= t <= end)
    gaps = [b - a for a, b in zip([start] + prog, prog)]
    if gaps:
        med = statistics.median(gaps)
        thr = stall_factor * med
        stalls = [g for g in gaps if g > thr]
        out["progress"] = {"events": len(prog), "median_gap_us": round(med / 1e3, 2),
                           "max_gap_ms": round(max(gaps) / 1e6, 3),
                           "stall_threshold_us": round(thr / 1e3, 2), "stalls": len(stalls),
                           "stall_time_ms": round(sum(stalls) / 1e6, 3),
                           "stall_fraction": round(sum(stalls) / (end - start), 4) if end > start else 0}
    return out


def analyze_rc(path, requester_addrs, mtu=4096, flap=None):
    """RC behaviour seen from the requester's interface: messages, go-back-N, ACK progress."""
    pkts = labpcap.roce_packets(path)
    base = None

    def rel(p):
        d = (p - base) % PSN_MOD
        return d - PSN_MOD if d >= PSN_MOD // 2 else d

    max_sent = -1
    prev_r = None
    cur = None
    msgs = []          # [first_psn, last_psn, first_tx_ns]
    reads = []         # [psn, first_tx_ns, npkts]
    tx = rtx = payload = 0
    rewinds = []       # (t, psn, cause)
    naks = []          # t of NAK-sequence-error
    rnr = dup_acks = acks = 0
    cum = -1
    progress = []      # (t, cum)
    last_nak_seen = None
    last_tx = None
    qps = set()
    for ts, p in pkts:
        from_req = p["src"] in requester_addrs
        op = p["opcode"]
        if from_req and (op in labpcap.REQUEST_DATA_OPS or op == labpcap.READ_REQUEST):
            qps.add(p["destqp"])
            if base is None:
                base = p["psn"]
            r = rel(p["psn"])
            tx += 1
            if r <= max_sent:
                rtx += 1
                if prev_r is None or r <= prev_r:
                    cause = "nak" if last_nak_seen is not None else "timeout"
                    since = ts - (progress[-1][0] if progress else pkts[0][0])
                    rewinds.append((ts, r, cause, since, ts - (last_tx or ts)))
                    last_nak_seen = None
            else:
                if op == labpcap.READ_REQUEST:
                    n = max(1, -(-p.get("reth_len", 0) // mtu))
                    reads.append([r, ts, n])
                    payload += p.get("reth_len", 0)
                    max_sent = r + n - 1
                else:
                    payload += p["payload_len"]
                    max_sent = r
                    if op in labpcap.FIRST_OPS or op in labpcap.ONLY_OPS:
                        cur = [r, None, ts]
                    if (op in labpcap.LAST_OPS or op in labpcap.ONLY_OPS) and cur is not None:
                        cur[1] = r
                        msgs.append(cur)
                        cur = None
            prev_r = r
            last_tx = ts
        elif not from_req and base is not None and op == labpcap.ACK:
            s = p.get("aeth_syndrome", 0)
            kind = s >> 5
            r = rel(p["psn"])
            if kind == 0:
                acks += 1
                if r > cum:
                    cum = r
                    progress.append((ts, cum))
                else:
                    dup_acks += 1
            elif kind == 3 and (s & 0x1F) == 0:
                naks.append(ts)
                last_nak_seen = ts
                if r - 1 > cum:
                    cum = r - 1
                    progress.append((ts, cum))
            elif kind == 1:
                rnr += 1
        elif not from_req and base is not None and op in labpcap.READ_RESPONSE_OPS:
            r = rel(p["psn"])
            if r == cum + 1:
                cum = r
                progress.append((ts, cum))
    # completions: first time cum covers the message's last PSN
    ends = [(m[1], m[2]) for m in msgs] + [(r + n - 1, t) for r, t, n in reads]
    ends.sort()
    first_tx, comp = [], []
    j = 0
    for last, t_first in ends:
        while j < len(progress) and progress[j][1] < last:
            j += 1
        first_tx.append(t_first)
        comp.append(progress[j][0] if j < len(progress) else None)
    res = {"roce_frames": len(pkts), "qps": len(qps), "data_tx": tx, "retransmitted": rtx,
           "retransmit_fraction": round(rtx / tx, 4) if tx else 0,
           "go_back_events": len(rewinds),
           "go_back_nak": sum(1 for r in rewinds if r[2] == "nak"),
           "go_back_timeout": sum(1 for r in rewinds if r[2] == "timeout"),
           "naks_rx": len(naks), "rnr_naks_rx": rnr, "acks_rx": acks, "duplicate_acks": dup_acks}
    # For a timeout rewind: how long the requester had been silent (~ the ACK timeout once the
    # window is spent) and how long since the acknowledged PSN last moved.
    for key, idx in (("timeout_idle_ms", 4), ("timeout_since_progress_ms", 3)):
        to = [r[idx] / 1e6 for r in rewinds if r[2] == "timeout"]
        if to:
            res[key] = {"min": round(min(to), 2), "median": round(statistics.median(to), 2),
                        "max": round(max(to), 2)}
    # progress events for the stall figures are message completions, as for the simulated runs
    res.update(timeline_stats(first_tx, comp, [c for c in comp if c is not None], payload))
    done = [c for c in comp if c is not None]
    if first_tx and done:
        res["first_tx_ns"] = min(t for t in first_tx if t is not None)
        res["last_completion_ns"] = max(done)
    if flap and progress:
        down, up = flap["down_us"] * 1000, flap["up_us"] * 1000
        before = [t for t, _ in progress if t <= down]
        after = [t for t, _ in progress if t >= up]
        if before and after:
            res["flap"] = {"down_ms": round((up - down) / 1e6, 1),
                           "no_progress_ms": round((after[0] - before[-1]) / 1e6, 2),
                           "recovery_after_up_ms": round((after[0] - up) / 1e6, 2)}
        elif not after:
            res["flap"] = {"down_ms": round((up - down) / 1e6, 1), "recovered": False}
    return res


PERF_ERR = re.compile(r"(error|Failed|Couldn't|Unable|retry|timeout)", re.I)


def parse_perftest(text, cpu_mhz=None, cycles=False):
    """The results table of a perftest client output (+ error lines). With -C (cycles=True) the
    latency columns hold TSC cycles although perftest still labels them [usec]; cpu_mhz (the
    guest's /proc/cpuinfo) converts them to microseconds."""
    out = {}
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.strip().startswith("#bytes"):
            # columns are separated by 2+ spaces, except "#bytes #iterations" in latency tests
            head = []
            for tok in re.split(r"\s{2,}", line.strip()):
                head += tok.split() if tok.startswith("#") else [tok]
            for v in lines[i + 1:]:
                if re.match(r"^\s*\d", v):
                    vals = v.split()
                    for h, x in zip(head, vals):
                        key = (h.replace("#", "").replace("[", "_").replace("]", "").replace("/", "_per_")
                               .replace("%", "pct").replace(" ", "_").replace(".", "_").lower())
                        try:
                            out[key] = float(x) if "." in x else int(x)
                        except ValueError:
                            out[key] = x
                    break
            break
    if cycles:
        for k in [k for k in out if k.endswith("_usec")]:
            out[k[:-len("_usec")] + "_cycles"] = out.pop(k)
    for k in [k for k in out if k.endswith("_cycles") and isinstance(out[k], (int, float))]:
        out[k[:-len("_cycles")] + "_usec"] = round(out[k] / cpu_mhz, 3) if cpu_mhz else None
    errs = [ln.strip() for ln in lines if PERF_ERR.search(ln) and "#" not in ln][:5]
    if errs:
        out["errors"] = errs
    return out


def read_counters(meta):
    a, b = meta.get("counters_after", {}), meta.get("counters_before", {})
    return {k: a[k] - b.get(k, 0) for k in sorted(a) if isinstance(a[k], int) and a[k] - b.get(k, 0)}


def collect(out_dir, mode=None, timings=None, kernel=None):
    setup = {}
    sp = os.path.join(out_dir, "setup.json")
    if os.path.isfile(sp):
        with open(sp) as fh:
            setup = json.load(fh)
    req = {setup.get("requester", {}).get("v4", "10.211.0.1"), "fd000211000000000000000000000001"}
    runs = []
    for mp in sorted(glob.glob(os.path.join(out_dir, "*.meta.json")), key=os.path.getmtime):
        with open(mp) as fh:
            meta = json.load(fh)
        name = meta["name"]
        run = {"name": name, "tool": meta["tool"], "family": meta["family"], "fault": meta["fault"],
               "args": meta["args"], "client_rc": meta["client_rc"], "server_rc": meta["server_rc"],
               "ok": meta["client_rc"] == 0 and meta["server_rc"] == 0,
               "wall_s": round((meta["t_end_us"] - meta["t_start_us"]) / 1e6, 3),
               "capture": {"file": f"{name}.pcap", "captured": meta.get("captured"),
                           "dropped_by_kernel": meta.get("capture_dropped")}}
        if meta["fault"] != "none":
            run["expected_failure"] = "fault runs may end in RETRY_EXC_ERR; that is a result"
        if "flap" in meta:
            run["flap"] = meta["flap"]
        cp = os.path.join(out_dir, f"{name}.client.txt")
        if os.path.isfile(cp):
            with open(cp, errors="replace") as fh:
                run["perftest"] = parse_perftest(fh.read(), setup.get("cpu_mhz"),
                                                 cycles=" -C" in f" {meta['args']}")
        run["rxe_counters_delta"] = read_counters(meta)
        jp = os.path.join(out_dir, f"{name}.client.json")
        if meta["tool"] == "mrc-perf" and os.path.isfile(jp):
            # mrc-perf prints one JSON object per connection (README of conformance/mrc-perf)
            with open(jp, errors="replace") as fh:
                objs = [json.loads(x) for x in fh.read().splitlines() if x.startswith("{")]
            run["mrc_perf"] = objs[0] if objs else {"error": "no result line"}
            run.pop("perftest", None)
        pp = os.path.join(out_dir, f"{name}.pcap")
        if os.path.isfile(pp):
            try:
                run["analysis"] = analyze_rc(pp, req, flap=meta.get("flap"))
            except labpcap.PcapError as e:
                run["analysis"] = {"error": str(e)}
        runs.append(run)
    return {"setup": setup, "mode": mode, "kernel": setup.get("kernel", kernel),
            "host_loadavg": os.getloadavg(), "host_cpus": os.cpu_count(),
            "timings": timings or {}, "runs": runs}


def print_table(summary):
    print(f"{'run':34} {'rc':>3} {'perftest':>22} {'goodput':>9} {'lat p99':>10} {'lat max':>10} "
          f"{'rtx%':>6} {'gbN/to':>7} {'stall ms':>9}")
    for r in summary["runs"]:
        pt = r.get("perftest", {})
        if "bw_average_gb_per_sec" in pt:
            perf = f"{pt['bw_average_gb_per_sec']:.3f} Gb/s"
        elif pt.get("t_typical_usec") is not None:
            perf = f"{pt['t_typical_usec']:.2f} us typ"
        else:
            perf = "-"
        a = r.get("analysis", {})
        lat = a.get("latency_us", {})
        pr = a.get("progress", {})

        def f(v, fmt):
            return format(v, fmt) if isinstance(v, (int, float)) else "-"
        print(f"{r['name']:34} {r['client_rc']:>3} {perf:>22} {f(a.get('goodput_gbps'), '.3f'):>9} "
              f"{f(lat.get('p99'), '.0f'):>10} {f(lat.get('max'), '.0f'):>10} "
              f"{f(100 * a.get('retransmit_fraction', 0), '.2f'):>6} "
              f"{a.get('go_back_nak', '-')}/{a.get('go_back_timeout', '-'):<4} "
              f"{f(pr.get('stall_time_ms'), '.1f'):>9}")
